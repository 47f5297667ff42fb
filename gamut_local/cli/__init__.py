"""The `gamut-local` command line. `main` builds the typer app and registers every command;
each command is a thin call into one stage, kept with the others of its group:

- `pipeline`: run, generate, judge, score-run, score, agree, compare, report
- `authoring`: validate, compile, draft, audit, lint, export, import, diff
- `cluster`: plan, slurm, status
- `verdicts`: verdicts export, verdicts import, jury
- `calibration`: sample, plan-sample
- `view`: view

Options several commands share are declared once in `options`; error and signal handling is
`errors`; the process's own settings (collector, allocator) are `process`. What a command
prints about its result is formatted in `gamut_local.reporting.console`.

Heavy modules (engines, stages that load models, plotting) are imported inside the command
that needs them, so `gamut-local score` starts without torch.
"""
