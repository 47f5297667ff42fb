"""YAML configs for models, judges, runs and sweeps, validated by pydantic on load.

A run names its models and judges either inline or by a name that resolves to
`configs/models/<name>.yaml` / `configs/judges/<name>.yaml` (searched beside the run file's
`configs/` folder). Paths inside a config are relative to the config file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InputError, Problem, pydantic_problems


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineArgs(_Config):
    """Passed to the engine; None means the engine's default."""

    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    enforce_eager: bool = False
    dtype: str = "auto"
    seed: int = 0
    enable_prefix_caching: bool = True
    kv_cache_memory_bytes: int | None = None
    limit_mm_per_prompt: dict[str, int] = {"image": 1, "video": 0}
    min_pixels: int | None = None  # image pixel caps (Qwen-VL style: multiples of 32*32)
    max_pixels: int | None = 1280 * 32 * 32
    max_num_seqs: int | None = None
    extra: dict = {}  # anything else, passed to the engine constructor as is


class Sampling(_Config):
    max_tokens: int = 1024
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


class ModelSpec(_Config):
    name: str = Field(min_length=1)  # the `model` / `judge` field of records
    path: str = Field(min_length=1)  # local folder, or a hub id resolved offline from the HF cache
    backend: Literal["vllm", "transformers", "auto"] = "auto"
    vision: bool = True  # False: the model cannot take images (text_only variant only)
    engine: EngineArgs = EngineArgs()
    sampling: Sampling = Sampling()
    system_prompt: str | None = None
    gpus: int | None = None  # per task; defaults to tensor_parallel_size
    nodes: int = 1  # > 1: runs through Ray across nodes (see slurm/)

    def settings_hash(self) -> str:
        """What determines the outputs, hashed; part of every record's resume key."""
        keep = self.model_dump(include={"path", "engine", "sampling", "system_prompt"})
        keep["engine"] = {k: v for k, v in keep["engine"].items()
                          if k in ("dtype", "seed", "max_model_len", "min_pixels", "max_pixels")}
        return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:12]


class JudgeSpec(ModelSpec):
    sees_image: bool = False  # judge_sees_image: the judge gets the question's image too
    max_retries: int = 2  # for output that cannot be read, then `invalid`
    sampling: Sampling = Sampling(max_tokens=16)


class SlurmSpec(_Config):
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_generate: str = "12:00:00"
    time_judge: str = "24:00:00"
    time_score: str = "01:00:00"
    cpus_per_gpu: int = 8
    mem_per_gpu: str = "64G"
    gpus_per_node: int = 8
    shards_generate: int = 1
    shards_judge: int = 1
    extra_sbatch: list[str] = []  # extra "#SBATCH ..." lines, verbatim
    setup: list[str] = []  # shell lines run before each task (module load, venv activate)


class PlanSpec(_Config):
    """Throughput assumptions for `gamut-local plan` (tokens per second per GPU)."""

    prefill_tokens_per_s_per_gpu: float = 20000.0
    decode_tokens_per_s_per_gpu: float = 2000.0
    mean_answer_tokens: int = 600
    mean_question_tokens: int = 60
    image_tokens: int = 640
    judge_instruction_tokens: int = 400
    mean_check_tokens: int = 30


class RunSpec(_Config):
    name: str = Field(min_length=1)
    dataset: str = Field(min_length=1)
    output_dir: str = Field(min_length=1)
    models: list[ModelSpec] = []
    variants: list[Literal["multimodal", "text_only"]] = ["multimodal"]
    judges: list[JudgeSpec] = Field(min_length=1)
    # Answer files judged beside the generated ones (e.g. the sample's reference answers).
    extra_answers: list[str] = []
    # Verdict files scored beside the judged ones (e.g. the sample's gold verdicts).
    extra_verdicts: list[str] = []
    seed: int = 0
    slurm: SlurmSpec = SlurmSpec()
    plan: PlanSpec = PlanSpec()


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        raise InputError([Problem(str(path), None, "", "config file not found")])
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise InputError([Problem(str(path), None if line is None else line + 1, "",
                                  f"not valid YAML: {e}")]) from None
    if not isinstance(data, dict):
        raise InputError([Problem(str(path), None, "", "expected a YAML mapping at the top level")])
    return data


def _resolve_ref(ref, kind: str, run_path: Path, problems: list[Problem], field: str):
    """A model/judge given by name -> its YAML (configs/<kind>/<name>.yaml) as a dict."""
    if isinstance(ref, dict):
        return ref
    if not isinstance(ref, str):
        problems.append(Problem(str(run_path), None, field, "expected a name or a mapping"))
        return None
    for root in (run_path.parent, *run_path.parents):
        candidate = root / kind / f"{ref}.yaml"
        if root.name == "configs" or (root / "configs").is_dir():
            candidate = (root if root.name == "configs" else root / "configs") / kind / f"{ref}.yaml"
            if candidate.is_file():
                data = _read_yaml(candidate)
                data.setdefault("name", ref)
                return data
    problems.append(Problem(str(run_path), None, field, f"no configs/{kind}/{ref}.yaml found"))
    return None


def _relative(p: str, base: Path) -> str:
    """Paths in configs are relative to the config file; hub ids and absolute paths stay."""
    if p.startswith(("/", "pkg:")) or (p.count("/") == 1 and not Path(base / p).exists()
                                       and not p.startswith(".")):
        return p  # absolute, package reference, or a hub id like Qwen/Qwen3-VL-8B-Instruct
    return str((base / p).resolve())


def load_run_config(path: str | Path) -> RunSpec:
    """Read a run YAML, resolve model/judge names and relative paths, validate everything."""
    path = Path(path)
    data = _read_yaml(path)
    problems: list[Problem] = []
    for kind in ("models", "judges"):
        refs = data.get(kind, [])
        if isinstance(refs, list):
            data[kind] = [r for i, r in enumerate(refs)
                          if (r := _resolve_ref(r, kind, path, problems, f"{kind}.{i}")) is not None]
    if problems:
        raise InputError(problems)
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as e:
        raise InputError(pydantic_problems(e, str(path), None)) from None
    base = path.parent
    return spec.model_copy(update={
        "dataset": _relative(spec.dataset, base),
        "output_dir": _relative(spec.output_dir, base),
        "extra_answers": [_relative(p, base) for p in spec.extra_answers],
        "extra_verdicts": [_relative(p, base) for p in spec.extra_verdicts],
    })
