"""What people look at and what programs read: report.md's sections (`markdown`), figures
(`figures`), the analysis files and the report's CSV/JSON tables (`tables`), and the progress
bars of long stages (`progress`).

May import `analysis`, `data`, `rundir`, `vocab` and `errors`; never an engine (it starts
without torch).
"""
