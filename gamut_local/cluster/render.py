"""A job graph's scripts: the `slurm/` templates (or the run's `slurm.templates`) with their
`{{ name }}` placeholders filled from each job's values, `task-env.sh` shared by all of them."""

from __future__ import annotations

import re
from pathlib import Path

from gamut_local.cluster.graph import Job
from gamut_local.config import PROJECT_ROOT, RunSpec
from gamut_local.errors import InputError, Problem

TEMPLATES = PROJECT_ROOT / "slurm"  # the project checkout's slurm/
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")



def templates_dir(spec: RunSpec, config_path: Path) -> Path:
    if spec.slurm.templates:
        d = Path(spec.slurm.templates)
        return d if d.is_absolute() else (config_path.parent / d).resolve()
    return TEMPLATES


def render(template: str, values: dict, name: str) -> str:
    """Fill `{{ name }}` placeholders; an unknown placeholder is an error, not an empty line."""
    missing = sorted({k for k in _PLACEHOLDER.findall(template) if k not in values})
    if missing:
        raise InputError([Problem(name, None, "", f"template placeholder(s) with no value: {', '.join(missing)}")])
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def render_jobs(jobs: list[Job], tdir: Path) -> None:
    def read(name: str) -> str:
        path = tdir / name
        if not path.is_file():
            raise InputError([Problem(str(path), None, "", "SLURM template not found")])
        return path.read_text(encoding="utf-8")

    for job in jobs:
        values = {**job.values}
        values["task_env"] = render(read("task-env.sh"), values, str(tdir / "task-env.sh")).rstrip("\n")
        job.script = render(read(job.template), values, str(tdir / job.template))
