"""Running at cluster scale. The SLURM job graph (`graph`), its scripts (`render`), the done
markers a resubmission reads (`done`), submitting it (`slurm`), what was submitted (`jobs_file`)
and how far it got (`status`); whether its requests fit the nodes (`fit`); and the cost of a
run in requests, tokens and GPU-hours (`cost`, `image_tokens`, `plan`).

May import `config`, `data`, `rubric`, `rundir` and below; never a stage. Of `engines` it uses
only what needs no model loaded: the check that a model folder would load
(`engines.model_problem`) and a served judge's `vllm serve` arguments
(`engines.vllm_engine.serve_args`, imported when a server job is built). It never starts an
engine, and importing it loads neither torch, vLLM nor transformers: it runs on login nodes.
"""
