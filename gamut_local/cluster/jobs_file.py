"""`slurm/jobs.json`: the job ids `slurm --submit` recorded, one entry per submission, read
and checked by `read_jobs` for `status` and for the next `slurm --submit` (which appends to
it). A damaged record (cut short, a field missing or mistyped, a bad array range) is an
InputError naming the file and the field, never an internal error in whoever reads it next.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from gamut_local.errors import InputError, Problem

# One element of SLURM's --array list: N or N-M, optionally stepped (N-M:S); `%T` ends the list.
_ARRAY_PART = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
ARRAY_MAX = 10_000_000  # above any cluster's MaxArraySize: a range past it is damage, not a job


def expand_indices(spec: str | None) -> list[int]:
    """'0-2,5%4' -> [0, 1, 2, 5] (SLURM's --array syntax; compress_indices' inverse).
    Raises ValueError, with what is wrong, for anything else."""
    out: list[int] = []
    for part in (spec or "").split("%")[0].split(","):
        if not part:
            continue
        m = _ARRAY_PART.match(part.strip())
        if m is None:
            raise ValueError(f"{part!r} is not an index or a range N-M")
        lo, hi, step = int(m.group(1)), int(m.group(2) or m.group(1)), int(m.group(3) or 1)
        if hi < lo or hi >= ARRAY_MAX or step < 1:
            raise ValueError(f"range {part!r} is empty or past {ARRAY_MAX:,}")
        out += range(lo, hi + 1, step)
    return out


def _jobs_problem(path: Path, field: str, what: str) -> InputError:
    return InputError([Problem(str(path), None, field, f"{what}; the file records the job ids of earlier "
                               "submissions: restore it from a backup, or remove it (status then lists "
                               "no job ids and a resubmission starts a fresh record)")])


def _check_job(path: Path, where: str, job) -> None:
    if not isinstance(job, dict):
        raise _jobs_problem(path, where, "expected a JSON object (one submitted job)")
    for name in ("key", "job_id"):
        if not isinstance(job.get(name), str) or not job[name]:
            raise _jobs_problem(path, f"{where}.{name}", "missing, or not a non-empty string")
    if not job["job_id"].isdigit():
        raise _jobs_problem(path, f"{where}.job_id", f"{job['job_id']!r} is not a SLURM job id (digits)")
    if job.get("log") is not None and not isinstance(job["log"], str):
        raise _jobs_problem(path, f"{where}.log", "not a string")
    if job.get("array") is not None:
        try:
            if not isinstance(job["array"], str) or not expand_indices(job["array"]):
                raise ValueError(f"{job['array']!r} lists no task")
        except ValueError as e:
            raise _jobs_problem(path, f"{where}.array", f"not a SLURM array range such as 0-9,12: {e}") from None


def read_jobs(path: Path) -> list[dict]:
    """The submissions `slurm --submit` recorded in slurm/jobs.json, checked: a damaged file
    (cut short, a field missing or of the wrong type, a bad array range) is an InputError
    naming the file and the field, not an internal error in whoever reads it next."""
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _jobs_problem(path, "", f"not valid JSON ({e}); was its write cut short?") from None
    subs = data.get("submissions") if isinstance(data, dict) else None
    if not isinstance(subs, list):
        raise _jobs_problem(path, "submissions", "missing, or not a list")
    for i, sub in enumerate(subs):
        if not isinstance(sub, dict) or not isinstance(sub.get("jobs"), list):
            raise _jobs_problem(path, f"submissions.{i}.jobs", "missing, or not a list")
        if not isinstance(sub.get("config", ""), str):
            raise _jobs_problem(path, f"submissions.{i}.config", "not a string (the run config's path)")
        for k, job in enumerate(sub["jobs"]):
            _check_job(path, f"submissions.{i}.jobs.{k}", job)
    return subs
