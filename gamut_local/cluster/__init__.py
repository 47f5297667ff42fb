"""Running at cluster scale: the SLURM job graph and its scripts (`slurm`) and the cost
estimate of a run in requests, tokens and GPU-hours (`cost`).

May import `config`, `data`, `rubric`, `rundir` and below; never a stage or an engine.
"""
