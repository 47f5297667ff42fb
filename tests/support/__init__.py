"""What the test suite and the benchmark scripts share, and a user never needs: the fake engine,
the suite's engine settings, fault-injecting servers, a local SLURM harness, child processes
killed whole, seeded runs and synthetic verdicts. Not in the wheel; scripts put the repository
root on sys.path to import it."""
