"""YAML configs for models, judges, runs and sweeps, validated by pydantic on load.

A run names its models and judges either inline or by a name that resolves to
`configs/models/<name>.yaml` / `configs/judges/<name>.yaml`. The `configs/` folder is looked
for above the run file first, then in the current directory, then in the project checkout
this package lives in.

Paths inside a config are relative to the config file that holds them. `${VAR}` and
`${VAR:-default}` are expanded first (e.g. `${GAMUT_MODEL_CACHE:-../../.cache/models}/x`), so
one config serves machines that keep weights in different places. A model `path` of the form
`org/name` that is not a local folder is a Hugging Face hub id, read offline from the cache.

One concern per module: `base` (what every config model shares), `models` (model and judge
settings), `slurm` (SLURM settings and grammar), `run` (a run's settings), `authoring`
(draft and audit), `paths` (names and paths), `weights` (finding weights and identifying
them), `loading` (reading files, with errors at their line). This module re-exports what
the rest of the package imports.
"""

from gamut_local.config.authoring import AuditSpec, DraftSpec
from gamut_local.config.loading import VALUE_FORMS, load_authoring_config, load_run_config
from gamut_local.config.models import EXTRA_TYPES, JUDGE_UNUSED, EngineArgs, JudgeSpec, ModelSpec, Sampling, ServerArgs
from gamut_local.config.paths import PROJECT_ROOT, expand_vars, is_hub_id
from gamut_local.config.run import CalibrationSpec, CompileSpec, PlanSpec, RunSpec
from gamut_local.config.slurm import SLURM_MEM, SLURM_TIME, SlurmSpec, mem_mb, slurm_hours
from gamut_local.config.weights import (
    IDENTITY_FILES,
    MODEL_CONFIG_FILES,
    resolve_model_path,
    server_host,
    weights_identity,
    weights_key,
)
from gamut_local.strict_yaml import MAX_YAML_NODES, load_yaml_lines, load_yaml_node, load_yaml_text

__all__ = [
    "AuditSpec", "CalibrationSpec", "CompileSpec", "DraftSpec", "EXTRA_TYPES", "EngineArgs", "IDENTITY_FILES",
    "JUDGE_UNUSED", "JudgeSpec", "MAX_YAML_NODES", "MODEL_CONFIG_FILES", "ModelSpec", "PROJECT_ROOT", "PlanSpec",
    "RunSpec", "SLURM_MEM", "SLURM_TIME", "Sampling", "ServerArgs", "SlurmSpec", "VALUE_FORMS", "expand_vars",
    "is_hub_id", "load_authoring_config", "load_run_config", "load_yaml_lines", "load_yaml_node",
    "load_yaml_text", "mem_mb", "resolve_model_path", "server_host", "slurm_hours", "weights_identity",
    "weights_key",
]
