"""`gamut-local view`: a local web app over a run directory (overview, questions, the question
page with its meta-rubric tree, and an adjudication queue that writes human verdicts).

Imports data, rubric, rundir, analysis and the web stack (starlette, jinja2, uvicorn, pyarrow:
the `view` extra), the latter lazily; the cli calls it, nothing below imports it.
"""
