"""The maths over integer-coded verdicts: the GAMUT formula and bootstraps (`metrics`), judge
panels, agreement and calibration (`agreement`), and rank/kappa/alpha statistics (`stats`).

Imports only numpy, `vocab` and `errors`: no engine, no file reading, no torch.
"""
