"""Hostile input, third pass, on what commands report and write: `status` and `slurm --submit`
over a damaged `slurm/jobs.json`, `status`'s counts, a back end whose extra is not installed,
`report --allow-incomplete` on systems that share no question (whole outputs or none), the
viewer asked for a page while it reads a run it then refuses, and the manifest after a
settings change. Every failure: non-zero exit, no traceback, the file and field named, every
file byte-identical afterwards."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "gamut_local" / "data" / "sample" / "questions.jsonl"


def _tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` (the run directory included) by its hash."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ slurm/jobs.json, damaged

GOOD_JOB = {"key": "generate.cand", "stage": "generate", "job_id": "4242", "script": "s.sbatch",
            "array": "0-1", "log": "run/slurm/logs/gen-4242_%a.out"}


def _jobs(**job) -> str:
    return json.dumps({"submissions": [{"time": "t", "config": "run.yaml", "jobs": [{**GOOD_JOB, **job}]}]})


DAMAGED = {  # what a damaged record holds -> the field the message must name
    "truncated": (_jobs()[:57], ["not valid JSON", "cut short"]),
    "empty": ("", ["not valid JSON"]),
    "not UTF-8": (b"\xff\xfe{}", ["not valid JSON"]),
    "a list": ("[]", ["submissions", "missing"]),
    "no submissions": ('{"subs": []}', ["submissions", "missing"]),
    "jobs not a list": ('{"submissions": [{"config": "run.yaml", "jobs": 3}]}', ["submissions.0.jobs"]),
    "a job not an object": ('{"submissions": [{"jobs": ["x"]}]}', ["submissions.0.jobs.0"]),
    "no job id": (_jobs(job_id=None), ["submissions.0.jobs.0.job_id", "missing"]),
    "no key": (_jobs(key=""), ["submissions.0.jobs.0.key"]),
    "job id not digits": (_jobs(job_id="12;rm"), ["submissions.0.jobs.0.job_id", "'12;rm'"]),
    "array backwards": (_jobs(array="5-2"), ["submissions.0.jobs.0.array", "'5-2'"]),
    "array not a range": (_jobs(array="0-x"), ["submissions.0.jobs.0.array", "'0-x'"]),
    "array of a billion tasks": (_jobs(array="0-999999999"), ["submissions.0.jobs.0.array"]),
    "array a number": (_jobs(array=3), ["submissions.0.jobs.0.array"]),
    "log a list": (_jobs(log=["a"]), ["submissions.0.jobs.0.log"]),
    "config a number": ('{"submissions": [{"config": 1, "jobs": []}]}', ["submissions.0.config"]),
}


def _damage(world, content) -> Path:
    jobs = world.run_dir / "slurm" / "jobs.json"
    jobs.parent.mkdir(parents=True, exist_ok=True)
    jobs.write_bytes(content if isinstance(content, bytes) else content.encode())
    return jobs


@pytest.mark.parametrize("case", sorted(DAMAGED))
@pytest.mark.parametrize("given", ["config", "run directory"])
def test_status_names_a_damaged_jobs_record(world, expect, case, given):
    content, words = DAMAGED[case]
    cfg = world.config()
    jobs = _damage(world, content)
    target = world.run_dir if given == "run directory" else cfg  # a run directory: its config is in the record
    before = _tree(world.root)
    out = expect(1, "status", target, named=[str(jobs), *words])
    assert "internal error" not in out and _tree(world.root) == before


@pytest.fixture
def sbatch(world, monkeypatch):
    """A stand-in sbatch on PATH that logs its calls; returns the log's path."""
    bin_dir = world.root.parent / f"{world.root.name}-bin"
    bin_dir.mkdir()
    log = bin_dir / "calls.log"
    (bin_dir / "sbatch").write_text(f"#!{sys.executable}\nimport sys\n"
                                    f"open({str(log)!r}, 'a').write(' '.join(sys.argv) + '\\n')\nprint('4243')\n")
    (bin_dir / "sbatch").chmod(0o755)
    # A controller that does not answer: the request check is skipped, as without sinfo.
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'Unable to contact slurm controller' >&2\nexit 1\n")
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.mark.parametrize("case", ["truncated", "no job id", "array backwards", "jobs not a list"])
@pytest.mark.parametrize("force", [False, True])
def test_submit_refuses_a_damaged_jobs_record_before_any_sbatch(world, expect, sbatch, case, force):
    """Read first: with --force too, a record found damaged only after the new jobs were
    queued would leave jobs that no file records."""
    content, words = DAMAGED[case]
    cfg = world.config()
    jobs = _damage(world, content)
    before = _tree(world.root)
    expect(1, "slurm", cfg, "--submit", *(["--force"] if force else []), named=[str(jobs), *words])
    assert not sbatch.exists() and _tree(world.root) == before


def test_a_good_record_is_read_and_a_resubmission_appends_to_it(world, expect, sbatch):
    cfg = world.config()
    _damage(world, _jobs(array="0-1,3%2"))
    out = expect(0, "status", cfg, inputs_change=True)
    assert "job 4242" in out
    expect(0, "slurm", cfg, "--submit", "--force", inputs_change=True)
    subs = json.loads((world.run_dir / "slurm" / "jobs.json").read_text())["submissions"]
    assert len(subs) == 2 and subs[0]["jobs"][0]["array"] == "0-1,3%2" and subs[1]["jobs"][0]["job_id"] == "4243"


# ------------------------------------------------------------------ status: what it counts

def _two_questions(world) -> None:
    """Two sample questions whose flexible lists compile to fewer checks at small_pool_max 0."""
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line]
    rows = [r for r in rows if r["question_id"] in ("animals-tabby-cat", "animals-horse")]
    for r in rows:
        r.pop("image")
    world.write_jsonl(world.dataset, rows)


@pytest.mark.parametrize("pool, expected", [(0, 13 + 14), (6, 16 + 17)])
def test_status_counts_extra_answers_with_the_runs_compile_setting(world, expect, pool, expected):
    """A system given as extra answers (nothing generated for it) is judged on its answered
    questions, with the checks the run's `compile.small_pool_max` makes (13 + 14 checks at 0,
    16 + 17 at the default 6, counted by hand from the sample's rubrics)."""
    _two_questions(world)
    world.answers(world.root / "ref.jsonl", model="ref", qids=("animals-tabby-cat", "animals-horse"))
    cfg = world.config(extra_answers=["ref.jsonl"], compile={"small_pool_max": pool})
    out = expect(0, "status", cfg, inputs_change=True)
    assert f"0/{expected} verdicts of the answers of 2 systems" in out
    expect(0, "judge", "--config", cfg, "--model", "ref", inputs_change=True)
    out = expect(0, "status", cfg, inputs_change=True)
    assert f"{expected}/{expected} verdicts of the answers of 2 systems" in out
