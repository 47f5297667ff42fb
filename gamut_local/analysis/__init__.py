"""The maths over integer-coded verdicts: the GAMUT formula (`metrics`), one scoring path over
a verdict table (`scoring`), judge agreement (`agreement`), model comparisons (`comparisons`),
the report's tables (`summary`), rank/kappa/alpha statistics (`stats`) and the typed output
files' models (`outputs`).

Imports only numpy, pydantic, `vocab` and `errors`: no engine, no file reading, no torch.
"""
