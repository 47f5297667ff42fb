"""What people look at: the report's Markdown sections, figures, CSV/JSON tables, and the
progress bars of long stages.

May import `analysis`, `vocab` and `errors`; never an engine (it starts without torch).
"""
