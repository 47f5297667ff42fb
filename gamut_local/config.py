"""YAML configs for models, judges, runs and sweeps, validated by pydantic on load.

A run names its models and judges either inline or by a name that resolves to
`configs/models/<name>.yaml` / `configs/judges/<name>.yaml`. The `configs/` folder is looked
for above the run file first, then in the current directory, then in the project checkout
this package lives in.

Paths inside a config are relative to the config file that holds them. `${VAR}` and
`${VAR:-default}` are expanded first (e.g. `${GAMUT_MODEL_CACHE:-../../.cache/models}/x`), so
one config serves machines that keep weights in different places. A model `path` of the form
`org/name` that is not a local folder is a Hugging Face hub id, read offline from the cache.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from gamut_local.errors import InputError, Problem, pydantic_problems
from gamut_local.vocab import DEFAULT_VARIANT, NAME_PATTERN, VARIANTS, Variant

# A SLURM time limit: M, M:S, H:M:S, D-H, D-H:M or D-H:M:S.
SLURM_TIME = r"(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2})"
SLURM_MEM = r"\d+[KMGT]?"  # sbatch --mem: a number with an optional K/M/G/T unit
SafeName = Field(min_length=1, pattern=f"^{NAME_PATTERN}$")


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


EXTRA_TYPES = {"pipeline_parallel_size": (int, "a whole number >= 1"),
               "tokenizer_mode": (str, "a string"), "distributed_executor_backend": (str, "a string")}


class EngineArgs(_Config):
    """Passed to the engine; None means the engine's default."""

    tensor_parallel_size: int = Field(default=1, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    enforce_eager: bool = False
    dtype: str = "auto"
    seed: int = Field(default=0, ge=0)
    enable_prefix_caching: bool = True
    kv_cache_memory_bytes: int | None = Field(default=None, ge=1)
    limit_mm_per_prompt: dict[str, int] = {"image": 1, "video": 0}
    min_pixels: int | None = Field(default=None, ge=1)  # image pixel caps (Qwen-VL style: multiples of 32*32)
    max_pixels: int | None = Field(default=1280 * 32 * 32, ge=1)
    max_num_seqs: int | None = Field(default=None, ge=1)
    extra: dict = {}  # anything else, passed to the engine constructor as is

    @field_validator("extra")
    @classmethod
    def _extra_keys_we_read(cls, extra: dict) -> dict:
        """The keys of `extra` gamut-local reads itself (GPU counts, the SLURM layout, the
        tokenizer) hold what it reads there; the rest go to the engine unread."""
        for key, (kind, what) in EXTRA_TYPES.items():
            value = extra.get(key)
            if key in extra and (isinstance(value, bool) or not isinstance(value, kind)):
                raise ValueError(f"extra.{key}: expected {what}, got {value!r}")
        if extra.get("pipeline_parallel_size", 1) < 1:
            raise ValueError(f"extra.pipeline_parallel_size: expected a whole number >= 1, "
                             f"got {extra['pipeline_parallel_size']!r}")
        return extra


class Sampling(_Config):
    max_tokens: int = Field(default=1024, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    seed: int = Field(default=0, ge=0)
    # Constrain the output to this JSON schema (set by `draft`, never needed in a model YAML).
    # It changes outputs, so it is part of the settings hash whenever it is set.
    json_schema: dict | None = None


class ModelSpec(_Config):
    name: str = SafeName  # the `model` / `judge` field of records; becomes file names
    path: str = Field(min_length=1)  # local folder, or a hub id resolved offline from the HF cache
    backend: Literal["vllm", "transformers", "auto"] = "auto"
    vision: bool = True  # False: the model cannot take images (text_only variant only)
    engine: EngineArgs = EngineArgs()
    sampling: Sampling = Sampling()
    system_prompt: str | None = None
    gpus: int | None = Field(default=None, ge=1)  # per task; defaults to tensor_parallel_size
    nodes: int = Field(default=1, ge=1)  # > 1: runs through Ray across nodes (see slurm/)
    # The YAML file this spec came from (for error messages); set by load_run_config.
    _source: str | None = PrivateAttr(default=None)

    @property
    def config_file(self) -> str | None:
        """The YAML file this spec came from; None for a spec written inline in a run config."""
        return self._source

    @property
    def source(self) -> str:
        """The YAML file this spec came from, for messages that name it."""
        return self._source or "<config>"

    def variants(self, run_variants) -> list[str]:
        """The run's variants this model can answer: without vision, only `text_only`."""
        return [v for v in run_variants if v != "multimodal" or self.vision]

    def total_gpus(self) -> int:
        """GPUs one task of this model takes: `gpus`, else tensor x pipeline parallel size."""
        pipeline = int(self.engine.extra.get("pipeline_parallel_size", 1) or 1)
        return self.gpus or self.engine.tensor_parallel_size * pipeline

    def settings_hash(self) -> str:
        """What determines the outputs, hashed; part of every record's resume key: the
        weights' identity (not where they lie, so a moved checkout or cache still resumes),
        the engine settings that change outputs (all of `extra`), sampling, system prompt."""
        keep = self.model_dump(include={"engine", "sampling", "system_prompt"})
        keep["engine"] = {k: v for k, v in keep["engine"].items()
                          if k in ("dtype", "seed", "max_model_len", "min_pixels", "max_pixels", "extra")}
        local, _ = resolve_model_path(self)
        keep["weights"] = (weights_identity(local, self.path if is_hub_id(self.path) else None)
                           if local else {"path": self.path})
        if keep["sampling"].get("json_schema") is None:  # unset: the hashes of earlier runs stay valid
            keep["sampling"].pop("json_schema", None)
        return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:12]


class JudgeSpec(ModelSpec):
    sees_image: bool = False  # judge_sees_image: the judge gets the question's image too
    max_retries: int = Field(default=2, ge=0)  # for output that cannot be read, then `invalid`
    sampling: Sampling = Sampling(max_tokens=16)


_SBATCH_WORD = r"^[A-Za-z0-9_.,:+=%-]+$"  # a partition, account or QoS name: one word, no newline
_SBATCH_LINE = re.compile(r"(?:#SBATCH\s+)?(--?[A-Za-z][A-Za-z0-9-]*)(?:[= ](\S.*))?")
_SBATCH_CHECKED = {"--time": SLURM_TIME, "-t": SLURM_TIME, "--mem": SLURM_MEM}


class SlurmSpec(_Config):
    partition: str | None = Field(default=None, pattern=_SBATCH_WORD)
    account: str | None = Field(default=None, pattern=_SBATCH_WORD)
    qos: str | None = Field(default=None, pattern=_SBATCH_WORD)
    time_generate: str = Field(default="12:00:00", pattern=f"^{SLURM_TIME}$")
    time_judge: str = Field(default="24:00:00", pattern=f"^{SLURM_TIME}$")
    time_score: str = Field(default="01:00:00", pattern=f"^{SLURM_TIME}$")
    cpus_per_gpu: int = Field(default=8, ge=1)
    mem_per_gpu: str = Field(default="64G", pattern=f"^{SLURM_MEM}$")
    gpus_per_node: int = Field(default=8, ge=1)
    shards_generate: int = Field(default=1, ge=1)
    shards_judge: int = Field(default=1, ge=1)
    extra_sbatch: list[str] = []  # extra "#SBATCH ..." lines, verbatim
    setup: list[str] = []  # shell lines run before each task (module load, venv activate)
    cpus_score: int = Field(default=8, ge=1)  # score and report jobs (CPU only)
    mem_score: str = Field(default="32G", pattern=f"^{SLURM_MEM}$")
    max_concurrent: int | None = Field(default=None, ge=1)  # array throttle: at most this many tasks of one array at once
    launcher: str = "gamut-local"  # how job scripts call the CLI (e.g. "python -m gamut_local.cli")
    templates: str | None = None  # a folder of your own sbatch templates (default: the project's slurm/)

    @field_validator("extra_sbatch")
    @classmethod
    def _sbatch_lines(cls, lines: list[str]) -> list[str]:
        """Each line one sbatch option (`--name[=value]`); time and memory values checked,
        so `--time=banana` fails here, not in the queue."""
        for line in lines:
            m = _SBATCH_LINE.fullmatch(line.strip())
            if "\n" in line or not m:
                raise ValueError(f"{line!r} is not one sbatch option like --constraint=h100")
            pattern = _SBATCH_CHECKED.get(m.group(1))
            if pattern and not re.fullmatch(pattern, (m.group(2) or "").strip()):
                raise ValueError(f"{line!r}: {m.group(2)!r} is not a valid {m.group(1)} value")
        return lines


class PlanSpec(_Config):
    """Throughput assumptions for `gamut-local plan` (tokens per second per GPU)."""

    prefill_tokens_per_s_per_gpu: float = Field(default=20000.0, gt=0)
    decode_tokens_per_s_per_gpu: float = Field(default=2000.0, gt=0)
    mean_answer_tokens: int = Field(default=600, ge=0)
    mean_question_tokens: int | None = Field(default=None, ge=0)  # None: measured (chars / chars_per_token)
    image_tokens: int = Field(default=640, ge=0)
    judge_instruction_tokens: int = Field(default=400, ge=0)
    mean_check_tokens: int | None = Field(default=None, ge=0)  # None: measured on the dataset's checks
    chars_per_token: float = Field(default=4.0, gt=0)
    judge_output_tokens: int = Field(default=5, ge=0)  # a constrained label is a few tokens
    # Per model/judge name: multiplies both throughputs (e.g. 0.1 for a 235B model, 3 for a 2B).
    throughput_scale: dict[str, Annotated[float, Field(gt=0)]] = {}


class RunSpec(_Config):
    name: str = SafeName
    dataset: str = Field(min_length=1)
    output_dir: str = Field(min_length=1)
    models: list[ModelSpec] = []
    variants: list[Variant] = [DEFAULT_VARIANT]
    judges: list[JudgeSpec] = Field(min_length=1)
    # Answer files judged beside the generated ones (e.g. the sample's reference answers).
    extra_answers: list[str] = []
    # Verdict files scored beside the judged ones (e.g. the sample's gold verdicts).
    extra_verdicts: list[str] = []
    seed: int = Field(default=0, ge=0)
    # Requests per engine call and per atomic append: a killed job loses at most one chunk.
    # Large enough to keep the engine's batch full; small enough to lose little on a kill.
    chunk_size: int = Field(default=1024, ge=1)
    slurm: SlurmSpec = SlurmSpec()
    plan: PlanSpec = PlanSpec()
    # The run YAML this spec came from; set by load_run_config.
    _source: str | None = PrivateAttr(default=None)

    @property
    def source(self) -> str:
        """The run YAML this spec came from, for messages that name it."""
        return self._source or "<run config>"

    def pick(self, kind: Literal["models", "judges"], name: str | None) -> list[ModelSpec]:
        """All of the run's models (or judges), or the one named on the command line."""
        specs = getattr(self, kind)
        if name is None:
            return list(specs)
        chosen = [m for m in specs if m.name == name]
        if not chosen:
            known = ", ".join(m.name for m in specs) or "none"
            raise InputError([Problem(self.source, None, kind,
                                      f"no {kind[:-1]} named {name!r} in this run (known: {known})")])
        return chosen

    def select_variants(self, variant: str | None) -> list[str]:
        """The run's variants, or the one named on the command line (which it must include)."""
        if variant is None:
            return list(self.variants)
        if variant not in VARIANTS:
            raise InputError([Problem("--variant", None, "",
                                      f"expected one of {', '.join(VARIANTS)}, got {variant!r}")])
        if variant not in self.variants:
            raise InputError([Problem(self.source, None, "variants",
                                      f"this run does not include the {variant!r} variant")])
        return [variant]


MAX_YAML_NODES = 100_000  # values that aliases may add to a document; far above any real use


# libyaml's parser where PyYAML was built with it: the pure-Python scanner takes a minute
# on an exported rubric of 20,000 items. The constructor (and so every rule below) is the same.
_SAFE_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SAFE_BASE):
    """Safe YAML with a key given twice refused (PyYAML keeps the last silently) and aliases
    bounded: a cyclic alias, or an alias bomb that would expand to gigabytes, is an error."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice (first on line {seen[key]})", key_node.start_mark)
                seen[key] = key_node.start_mark.line + 1
            except TypeError:  # an unhashable key: PyYAML reports it below
                continue
        return super().construct_mapping(node, deep=deep)

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        _check_aliases(node)
        return self.construct_document(node)


def _check_aliases(node) -> None:
    """Raise on a cyclic alias, or on aliases that add more than MAX_YAML_NODES values to the
    document (an alias bomb); a large document without aliases (an exported rubric of 10,000
    items) is not bounded."""
    memo: dict = {}
    if _expanded_size(node, memo, set()) > len(memo) + MAX_YAML_NODES:
        raise yaml.composer.ComposerError(None, None, f"expands to more than {MAX_YAML_NODES} values "
                                          "through its aliases", node.start_mark)


def _expanded_size(node, memo: dict, stack: set) -> int:
    """Nodes in the document with every alias expanded (memoised: linear in the distinct
    nodes); raises on a cycle."""
    if id(node) in stack:
        raise yaml.composer.ComposerError(None, None, "an alias refers to itself (a cycle)", node.start_mark)
    if id(node) in memo:
        return memo[id(node)]
    stack.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(n, memo, stack) for n in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo, stack) + _expanded_size(v, memo, stack) for k, v in node.value)
    else:
        size = 1
    stack.discard(id(node))
    memo[id(node)] = size
    return size


def load_yaml_text(text: str):
    """YAML as our configs are read: safe, no repeated keys, aliases bounded."""
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass


def load_yaml_node(text: str):
    """(node tree, value) of one YAML document read as `load_yaml_text` reads it: the tree for
    callers that point at the line of a field (`import` of an edited rubric)."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_aliases(node)
        return node, loader.construct_document(node)
    finally:
        loader.dispose()


def _read_yaml(path: Path) -> dict:
    try:
        if not path.is_file():
            why = "not a file" if path.exists() else "config file not found"
            raise InputError([Problem(str(path), None, "", why)])
        data = load_yaml_text(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError([Problem(str(path), None, "", f"cannot read: {e.strerror or e}")]) from None
    except RecursionError:
        raise InputError([Problem(str(path), None, "", "not valid YAML: nested too deeply")]) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise InputError([Problem(str(path), None if line is None else line + 1, "",
                                  f"not valid YAML: {e}")]) from None
    if not isinstance(data, dict):
        raise InputError([Problem(str(path), None, "", "expected a YAML mapping at the top level")])
    return data


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _config_roots(run_path: Path) -> list[Path]:
    """Candidate `configs/` folders, nearest first, without repeats."""
    roots = []
    for d in (run_path.resolve().parent, *run_path.resolve().parents):
        if d.name == "configs":
            roots.append(d)
        elif (d / "configs").is_dir():
            roots.append(d / "configs")
    roots += [Path.cwd() / "configs", PROJECT_ROOT / "configs"]
    seen, out = set(), []
    for r in roots:
        if r.is_dir() and r.resolve() not in seen:
            seen.add(r.resolve())
            out.append(r)
    return out


def _resolve_ref(ref, kind: str, run_path: Path, problems: list[Problem], field: str):
    """A model/judge given by name -> (its YAML as a dict, the file it came from)."""
    if isinstance(ref, dict):
        return ref, run_path
    if not isinstance(ref, str):
        problems.append(Problem(str(run_path), None, field, "expected a name or a mapping"))
        return None
    if not re.fullmatch(NAME_PATTERN, ref):
        # A reference is a plain name under configs/<kind>/, never a path (`../../x`).
        problems.append(Problem(str(run_path), None, field, f"{ref!r} is not a config name (letters, digits, "
                                "_ . + -, starting with a letter or digit); write the settings inline instead"))
        return None
    roots = _config_roots(run_path)
    for root in roots:
        candidate = root / kind / f"{ref}.yaml"
        if candidate.is_file():
            data = _read_yaml(candidate)
            data.setdefault("name", ref)
            return data, candidate
    where = ", ".join(str(r / kind) for r in roots) or "no configs/ folder found"
    problems.append(Problem(str(run_path), None, field, f"no {kind} config named {ref!r} (looked in {where})"))
    return None


def expand_vars(value: str, file: Path, field: str, problems: list[Problem]) -> str:
    """`${VAR}` / `${VAR:-default}` from the environment; an unset VAR without default is a problem."""

    def sub(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name in os.environ and os.environ[name] != "":
            return os.environ[name]
        if default is not None:
            return default
        problems.append(Problem(str(file), None, field,
                                f"environment variable {name} is not set (write ${{{name}:-default}} for a fallback)"))
        return m.group(0)

    return _VAR.sub(sub, value)


def is_hub_id(path: str) -> bool:
    return bool(_HUB_ID.fullmatch(path)) and not path.startswith(".")


def _relative(p: str, base: Path) -> str:
    """Paths in configs are relative to the config file; hub ids, absolute and pkg: paths stay."""
    p = os.path.expanduser(p)
    if p.startswith(("/", "pkg:")):
        return p
    return str((base / p).resolve())


def _model_path(p: str, base: Path) -> str:
    if p.startswith(("/", "~")) or not is_hub_id(p) or (base / p).exists():
        return _relative(p, base)
    return p  # a hub id like Qwen/Qwen3-VL-8B-Instruct


# What makes a folder a model folder: a Hugging Face config, or Mistral's own format
# (params.json, no config.json; e.g. mistralai/Pixtral-12B-2409, loaded with tokenizer_mode: mistral).
MODEL_CONFIG_FILES = ("config.json", "params.json")


# Files that fix what a folder's weights do with a prompt: architecture, generation defaults,
# tokenizer, chat templates, image processor. Hashed by content; the weights themselves are
# too large to hash on every start, so they count by file name and size (a hub snapshot
# adds its commit).
IDENTITY_FILES = (*MODEL_CONFIG_FILES, "generation_config.json", "tokenizer_config.json", "tokenizer.json",
                  "chat_template.jinja", "chat_template.json", "preprocessor_config.json",
                  "processor_config.json", "model.safetensors.index.json")


@functools.lru_cache(maxsize=64)
def weights_identity(local: str, hub_id: str | None = None) -> dict:
    """A model folder's identity, independent of where it lies (see IDENTITY_FILES)."""
    folder = Path(local)
    ident: dict = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
                   for name in IDENTITY_FILES if (folder / name).is_file()}
    ident["weights"] = sorted((f.name, f.stat().st_size) for f in folder.iterdir()
                              if f.suffix in (".safetensors", ".bin", ".pt", ".gguf"))
    if hub_id is not None:  # a hub cache snapshot folder is named by its commit
        ident["hub"] = {"id": hub_id, "revision": folder.name}
    return ident


def resolve_model_path(spec: ModelSpec) -> tuple[str | None, Problem | None]:
    """The local folder a model's weights are in, or a Problem naming what is missing.

    Checked before any model loads, so a typo costs a second, not a GPU allocation.
    Hub ids are looked up in the Hugging Face cache only (no network).
    """
    source = spec.source
    if not is_hub_id(spec.path) or Path(spec.path).is_absolute():
        path = Path(spec.path)
        if not path.is_dir():
            return None, Problem(source, None, "path", f"model folder not found: {path}")
        if not any((path / name).is_file() for name in MODEL_CONFIG_FILES):
            return None, Problem(source, None, "path",
                                 f"not a model folder (no config.json, nor a Mistral-format "
                                 f"params.json): {path}")
        return str(path), None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None, Problem(source, None, "path",
                             f"{spec.path!r} looks like a hub id, but huggingface_hub is not installed")
    hits = [try_to_load_from_cache(spec.path, name) for name in MODEL_CONFIG_FILES]
    hit = next((h for h in hits if isinstance(h, str)), None)
    if hit is None:
        from huggingface_hub.constants import HF_HUB_CACHE

        return None, Problem(source, None, "path",
                             f"{spec.path!r} is neither a local folder nor a hub id in the Hugging Face "
                             f"cache ({HF_HUB_CACHE}); download it where there is internet "
                             f"(huggingface-cli download {spec.path}) or point path at a local folder")
    return str(Path(hit).parent), None


def _validated(cls, data: dict, path: Path):
    """`data` as a `cls` config read from `path`, which it remembers as its source."""
    try:
        spec = cls.model_validate(data)
    except ValidationError as e:
        raise InputError(pydantic_problems(e, str(path), None)) from None
    spec._source = str(path)
    return spec


def load_run_config(path: str | Path) -> RunSpec:
    """Read a run YAML, resolve model/judge names and relative paths, validate everything."""
    path = Path(path)
    data = _read_yaml(path)
    problems: list[Problem] = []
    sources: dict[str, list[Path]] = {}
    for kind in ("models", "judges"):
        refs = data.get(kind, [])
        if not isinstance(refs, list):
            continue
        resolved, sources[kind] = [], []
        for i, r in enumerate(refs):
            got = _resolve_ref(r, kind, path, problems, f"{kind}.{i}")
            if got is None:
                continue
            spec, src = got
            if isinstance(spec.get("path"), str):
                spec = {**spec, "path": _model_path(expand_vars(spec["path"], src, "path", problems),
                                                    src.parent)}
            resolved.append(spec)
            sources[kind].append(src)
        data[kind] = resolved
    for key in ("dataset", "output_dir"):
        if isinstance(data.get(key), str):
            data[key] = _relative(expand_vars(data[key], path, key, problems), path.parent)
    for key in ("extra_answers", "extra_verdicts"):
        if isinstance(data.get(key), list):
            data[key] = [_relative(expand_vars(p, path, f"{key}.{i}", problems), path.parent)
                         if isinstance(p, str) else p for i, p in enumerate(data[key])]
    if problems:
        raise InputError(problems)
    spec = _validated(RunSpec, data, path)
    for kind in ("models", "judges"):
        for m, src in zip(getattr(spec, kind), sources.get(kind, [])):
            m._source = str(src)
    for kind in ("models", "judges"):
        names = [m.name for m in getattr(spec, kind)]
        for n in sorted({n for n in names if names.count(n) > 1}):
            problems.append(Problem(str(path), None, kind,
                                    f"{n!r} is listed twice (names key the result files)"))
    if problems:
        raise InputError(problems)
    return spec


# -- authoring rubrics: `gamut-local draft` and `gamut-local audit` ---------------------------


class DraftSpec(_Config):
    """DRAFT.yaml: which model drafts meta-rubrics, and the bounds its output is held to."""

    model: ModelSpec  # a name under configs/models/ or an inline mapping
    max_retries: int = Field(default=2, ge=0)  # re-asks with the validation errors, then recorded as failed
    chunk_size: int = Field(default=64, ge=1)  # questions per engine call and atomic append
    # Bounds written into the JSON schema the output is constrained to: they keep a drafted
    # meta-rubric to paper size (~15 checks) and stop a weak model from writing forever.
    max_items: int = Field(default=12, ge=1)
    max_list: int = Field(default=10, ge=2)  # elements, options, steps, entities, aspects
    max_chars: int = Field(default=300, ge=20)  # any one text field
    max_snippet_chars: int = Field(default=1500, ge=100)  # evidence text shown per snippet
    _source: str | None = PrivateAttr(default=None)


class AuditSpec(_Config):
    """AUDIT.yaml: which model re-reads each cited snippet, and what happens to ungrounded items."""

    model: ModelSpec
    ungrounded: Literal["keep", "demote", "drop"] = "demote"
    partial_counts: bool = False  # whether `partially_supported` grounds an item
    min_coverage: float = Field(default=0.5, ge=0.0, le=1.0)  # grounded share below this: "poorly covered"
    chunk_size: int = Field(default=256, ge=1)
    max_snippet_chars: int = Field(default=1500, ge=100)
    _source: str | None = PrivateAttr(default=None)


def load_authoring_config(path: str | Path, kind: type[DraftSpec] | type[AuditSpec]):
    """Read DRAFT.yaml / AUDIT.yaml: `model` by name (configs/models/<name>.yaml) or inline."""
    path = Path(path)
    data = _read_yaml(path)
    problems: list[Problem] = []
    model_src = path
    if "model" in data:
        got = _resolve_ref(data["model"], "models", path, problems, "model")
        if got is not None:
            model, model_src = got
            if isinstance(model.get("path"), str):
                model = {**model, "path": _model_path(expand_vars(model["path"], model_src, "path", problems),
                                                      model_src.parent)}
            data = {**data, "model": model}
    if problems:
        raise InputError(problems)
    spec = _validated(kind, data, path)
    spec.model._source = str(model_src)
    return spec
