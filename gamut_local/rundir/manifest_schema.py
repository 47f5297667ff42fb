"""The model of `manifest.json` (written by `rundir.manifest`), versioned like the analysis
files, the one way a run directory's manifest is read (`read_manifest`), and the records of
the input files a run was made from (path, size, sha256).

Kept apart from `rundir.manifest`, which gathers the environment (engines, git, packages):
a program that only reads a manifest needs this module alone. docs/outputs.md lists the fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gamut_local.errors import InputError, Problem, pydantic_problems
from gamut_local.hashing import file_sha256
from gamut_local.vocab import SMALL_POOL_MAX

MANIFEST_SCHEMA_VERSION = 1


class ManifestInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["dataset", "extra_answers", "extra_verdicts"]
    path: str
    bytes: int
    sha256: str


class _Kept(BaseModel):
    # Fields this version does not know (added by a later one) are kept, not refused.
    model_config = ConfigDict(extra="allow")


class RecordedCompile(_Kept):
    small_pool_max: Annotated[int, Field(strict=True, ge=0)] = SMALL_POOL_MAX


class RecordedConfig(_Kept):
    """The run config as the manifest records it (resolved, redacted): what a reader of the
    run directory takes from it is typed; every other key is kept as written."""

    name: str | None = None
    dataset: str | None = None
    extra_answers: list[str] = []
    extra_verdicts: list[str] = []
    compile: RecordedCompile = RecordedCompile()


class StageRecord(_Kept):
    seconds: float | None = None
    limit: Annotated[int, Field(strict=True)] | None = None  # `run --limit`: a pilot


class Manifest(_Kept):
    """`build_manifest` writes every field; one read from a run directory may lack those of
    the environment (a manifest made by hand, as a test or a benchmark makes one)."""

    schema_version: Literal[1] = MANIFEST_SCHEMA_VERSION
    kind: Literal["gamut-local manifest"] = "gamut-local manifest"
    run: str | None = None
    config_file: str | None = None
    config: RecordedConfig = RecordedConfig()
    created: str | None = None
    command: list[str] = []
    git: dict | None = None
    python: str | None = None
    platform: str | None = None
    packages: dict[str, str | None] = {}
    engine_build: dict | None = None
    models: list[dict] = []
    prompt_templates: dict = {}
    seeds: dict = {}
    stages: dict[str, StageRecord] = {}
    inputs: list[ManifestInput] = []


def manifest_path(run_dir: Path) -> Path:
    return Path(run_dir) / "manifest.json"


def read_manifest(run_dir: Path) -> Manifest | None:
    """The run directory's manifest.json, typed; None where there is none. Not JSON, or a field
    of the wrong type: an InputError naming the file and the field."""
    path = manifest_path(run_dir)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError([Problem(str(path), None, "", f"cannot read: {e.strerror or e}")]) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError([Problem(str(path), None, "", f"not valid JSON: {e}")]) from None
    if not isinstance(data, dict):
        raise InputError([Problem(str(path), None, "", "expected a JSON object")])
    try:
        return Manifest.model_validate(data)
    except ValidationError as e:
        raise InputError(pydantic_problems(e, str(path), None)) from None


def input_records(spec) -> list[dict]:
    """The dataset and the extra answer/verdict files a run config names (those that exist)."""
    out = []
    for role, refs in (("dataset", [spec.dataset]), ("extra_answers", spec.extra_answers),
                       ("extra_verdicts", spec.extra_verdicts)):
        for ref in refs:
            path = Path(ref)
            if path.is_file():
                out.append({"role": role, "path": str(path), "bytes": path.stat().st_size,
                            "sha256": file_sha256(path)})
    return out
