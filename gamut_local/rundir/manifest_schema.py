"""The model of `manifest.json` (written by `rundir.manifest`), versioned like the analysis
files, and the records of the input files a run was made from (path, size, sha256).

Kept apart from `rundir.manifest`, which gathers the environment (engines, git, packages):
a program that only reads a manifest needs this module alone. docs/outputs.md lists the fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from gamut_local.hashing import file_sha256

MANIFEST_SCHEMA_VERSION = 1


class ManifestInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["dataset", "extra_answers", "extra_verdicts"]
    path: str
    bytes: int
    sha256: str


class Manifest(BaseModel):
    # Fields this version does not know (added by a later one) are kept, not refused.
    model_config = ConfigDict(extra="allow")
    schema_version: Literal[1] = MANIFEST_SCHEMA_VERSION
    kind: Literal["gamut-local manifest"] = "gamut-local manifest"
    run: str
    config_file: str
    config: dict
    created: str
    command: list[str]
    git: dict | None
    python: str
    platform: str
    packages: dict[str, str | None]
    models: list[dict]
    prompt_templates: dict
    seeds: dict
    stages: dict
    inputs: list[ManifestInput]


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
