"""The pipeline's stages, one module each: compile, generate, judge, score, agree, compare,
report, and `pipeline`, which chains them for `gamut-local run`.

Stages never import each other (only `pipeline` imports stages); each reads and writes files
in the run directory through `rundir`, so every stage is resumable on its own.
"""
