"""Question, answer and verdict records (`records`), the GAMUT release and CRAG-MM adapters,
and the bundled sample benchmark (`sample/`).

May import `rubric`, `rundir.store`, `vocab` and `errors`.
"""
