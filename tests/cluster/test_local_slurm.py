"""The job graph on a real one-node SLURM (scripts/slurm_local.sh, fixture `real_slurm`), with
`true` or a small script as the launcher (and a stand-in for `vllm serve`): what is under test
is SLURM's side (sbatch accepting the scripts, arrays, afterok, a failed task, its cancelled
dependants, a judge server outliving failed clients, resubmission, `status`), not the
stages (which resume inside a shard: tests/e2e/test_slurm_run.py, tests/hostile/test_faults.py)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from gamut_local.config import PROJECT_ROOT

pytestmark = pytest.mark.slurm

SMALL = {"cpus_per_gpu": 1, "mem_per_gpu": "500M", "cpus_score": 1, "mem_score": "500M",
         "time_generate": "00:05:00", "time_judge": "00:05:00", "time_score": "00:05:00"}


def write_run(tmp_path: Path, **slurm) -> Path:
    (tmp_path / "data.jsonl").write_text("".join(json.dumps({
        "question_id": f"q{i}", "domain": "d", "question": "What is this?",
        "checks": [{"check_id": "c1", "text": "It says cat.", "tier": "answer_critical"}]}) + "\n" for i in range(3)))
    for name in ("m", "j"):  # a submission checks that model folders exist; nothing loads them here
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "config.json").write_text("{}")
    cfg = {"name": "loc", "dataset": "data.jsonl", "output_dir": str(tmp_path / "run"), "variants": ["text_only"],
           "models": [{"name": "m", "path": str(tmp_path / "m")}], "judges": [{"name": "j", "path": str(tmp_path / "j")}],
           "slurm": {**SMALL, "shards_judge": 2, "launcher": "true", **slurm}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def job_ids(run_dir: Path) -> list[str]:
    subs = json.loads((run_dir / "slurm" / "jobs.json").read_text())["submissions"]
    return [j["job_id"] for s in subs for j in s["jobs"]]


def wait_until_gone(ids: list[str], timeout: float = 90) -> None:
    """Until squeue lists none of these jobs (done, failed or cancelled)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = subprocess.run(["squeue", "-h", "-o", "%F"], capture_output=True, text=True, timeout=30)
        if not set(res.stdout.split()) & set(ids):
            return
        time.sleep(0.3)
    raise AssertionError(f"jobs {ids} still queued after {timeout} s: {res.stdout}")


def test_the_local_cluster_is_up_with_fake_gpus(real_slurm):
    res = subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "slurm_local.sh"), "status"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and any(f"is '{s}'" in res.stdout for s in ("idle", "mix", "alloc")), res.stdout + res.stderr
    out = subprocess.run(["sinfo", "-h", "-o", "%G"], capture_output=True, text=True, timeout=30).stdout
    assert "gpu:" in out


def test_a_request_the_partition_cannot_hold_is_named_before_submitting(real_slurm, gamut, tmp_path):
    cfg = write_run(tmp_path, mem_per_gpu="4000G", partition=None)
    res = gamut("slurm", "--config", cfg, "--dry-run")
    assert res.exit_code == 1 and "slurm.mem_per_gpu" in res.output and "job generate.m asks for 1 GPUs" in res.output
    assert not (tmp_path / "run" / "slurm").exists()
    res = gamut("slurm", "--config", write_run(tmp_path, partition="nosuch"), "--dry-run")
    assert res.exit_code == 1 and "partition nosuch is not on this cluster" in res.output
    res = gamut("plan", "--config", write_run(tmp_path, cpus_per_gpu=999))
    assert res.exit_code == 0 and "slurm.cpus_per_gpu" in res.output and "999 CPUs" in res.output


def test_a_fake_gpu_job_fails_clearly_then_a_fixed_resubmission_completes(real_slurm, gamut, tmp_path):
    """A job given GPUs that are not real ones stops with a clear message (not in vLLM); its
    dependants are cancelled; `status` names the task and its log; the resubmission after the
    fix (the job says it runs on CPU) completes, and one more submits nothing."""
    cfg = write_run(tmp_path)
    run_dir = tmp_path / "run"
    res = gamut("slurm", "--config", cfg, "--submit")
    assert res.exit_code == 0, res.output
    wait_until_gone(job_ids(run_dir))
    st = gamut("status", "--config", cfg)
    assert st.exit_code == 0, st.output
    assert "generate.m" in st.output and "FAILED" in st.output and "exit 2:0" in st.output
    log = next((run_dir / "slurm" / "logs").glob("loc.gen.m-*_0.out"))
    assert f"log: {log}" in st.output and "no GPU device" in log.read_text()
    assert "CANCELLED, DependencyNeverSatisfied; it never started (no log)" in st.output  # judging waited for it
    assert f"gamut-local slurm --config {cfg.resolve()} --submit" in st.output
    assert not (run_dir / "slurm" / "done").exists() or not any((run_dir / "slurm" / "done").iterdir())

    cfg = write_run(tmp_path, setup=["export GAMUT_FAKE_GPUS=1"])
    res = gamut("slurm", "--config", cfg, "--submit")
    assert res.exit_code == 0 and "Submitted 4 jobs (5 tasks)" in res.output, res.output
    wait_until_gone(job_ids(run_dir))
    done = sorted(p.name for p in (run_dir / "slurm" / "done").iterdir())
    assert done == ["generate.m.text_only.shard-0-of-1", "judge.j.m.text_only.shard-0-of-2",
                    "judge.j.m.text_only.shard-1-of-2", "report", "score"]
    st = gamut("status", run_dir)  # the run directory finds its config in jobs.json
    assert st.exit_code == 0 and "Every task is done." in st.output, st.output
    res = gamut("slurm", "--config", cfg, "--submit")
    assert res.exit_code == 0 and "Nothing to submit" in res.output
    assert len(json.loads((run_dir / "slurm" / "jobs.json").read_text())["submissions"]) == 2


SLOW_LAUNCHER = """#!/bin/bash
# judge shards wait (to be cancelled, or to run out of time) until the test sets the flag
if [ "$1" = judge ] && [ ! -e "$SLOW_FLAG" ]; then echo "shard ${@: -1}: slow"; sleep 600; fi
exit 0
"""


def _task_state(job_id: str, task: int) -> str:
    out = subprocess.run(["scontrol", "-o", "show", "job", f"{job_id}_{task}"], capture_output=True, text=True,
                         timeout=30).stdout
    return next((f.split("=", 1)[1] for f in out.split() if f.startswith("JobState=")), "")


def test_a_cancelled_and_a_timed_out_task_are_shown_and_resubmitted_alone(real_slurm, gamut, tmp_path, monkeypatch):
    """scancel one judge task, let the other run past its time limit: `status` names both and
    their logs, the dependants are cancelled, and the resubmission runs only those two tasks
    and the jobs after them (generation is done and is not resubmitted)."""
    launcher = tmp_path / "slow-launcher"
    launcher.write_text(SLOW_LAUNCHER)
    launcher.chmod(0o755)
    monkeypatch.setenv("SLOW_FLAG", str(tmp_path / "fast-now"))
    cfg = write_run(tmp_path, launcher=str(launcher), setup=["export GAMUT_FAKE_GPUS=1"])
    run_dir = tmp_path / "run"
    res = gamut("slurm", "--config", cfg, "--submit")
    judge_id = next(line.split()[0] for line in res.output.splitlines() if "judge.j" in line)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and {_task_state(judge_id, t) for t in (0, 1)} != {"RUNNING"}:
        time.sleep(0.3)
    subprocess.run(["scancel", f"{judge_id}_0"], check=True, timeout=30)
    # A one-minute limit on task 1 alone; SLURM checks limits about every 30 s.
    subprocess.run(["scontrol", "update", f"JobId={judge_id}_1", "TimeLimit=1"], check=True, timeout=30)
    wait_until_gone(job_ids(run_dir), timeout=150)
    st = gamut("status", "--config", cfg).output
    logs = run_dir / "slurm" / "logs"
    assert f"task 0 (job {judge_id}_0): CANCELLED; log: {logs}/loc.judge.j-{judge_id}_0.out" in st
    assert f"task 1 (job {judge_id}_1): TIMEOUT, TimeLimit; log: {logs}/loc.judge.j-{judge_id}_1.out" in st
    assert "DUE TO TIME LIMIT" in (logs / f"loc.judge.j-{judge_id}_1.out").read_text()
    assert st.count("CANCELLED, DependencyNeverSatisfied; it never started (no log)") == 2  # score, report
    (tmp_path / "fast-now").touch()
    res = gamut("slurm", "--config", cfg, "--submit")
    assert "Submitted 3 jobs (4 tasks)" in res.output and "generate" not in res.output, res.output
    wait_until_gone(job_ids(run_dir))
    assert "Every task is done." in gamut("status", "--config", cfg).output


FAILING_JUDGE_LAUNCHER = """#!/bin/bash
# every judging task fails (as a crash or an out-of-memory kill would); the rest succeeds
[ "$1" = judge ] && { echo "judge: failed on purpose" >&2; exit 3; }
exit 0
"""


def test_a_judge_server_stops_once_its_failed_clients_have_left_the_queue(real_slurm, gamut, tmp_path,
                                                                         vllm_serve_stand_in):
    """A served judge whose every client task fails: no shard is ever marked done, and the
    server job (holding a GPU) ends by itself once none of its clients is queued or running,
    saying why, instead of serving to its time limit."""
    bin_dir = tmp_path / "bin"  # `python` in the jobs: a stand-in for `vllm serve` (nothing loads)
    bin_dir.mkdir()
    for name, text in (("python", vllm_serve_stand_in), ("launch", FAILING_JUDGE_LAUNCHER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "served").mkdir()
    (tmp_path / "served" / "config.json").write_text("{}")
    cfg = write_run(tmp_path, launcher=str(bin_dir / "launch"), time_judge="00:10:00", shards_judge=1, setup=[
        "export GAMUT_FAKE_GPUS=1 GAMUT_SERVER_POLL_S=1 GAMUT_SERVER_HOST=127.0.0.1",
        f"export PATH={bin_dir}:$PATH FAKE_SERVE_LOG={tmp_path / 'serve.log'}"])
    run = yaml.safe_load(cfg.read_text())
    run["judges"] = [{"name": "j", "path": "served-judge", "backend": "openai",
                      "server": {"base_url": "http://localhost:8000/v1", "serve": str(tmp_path / "served")}}]
    cfg.write_text(yaml.safe_dump(run))
    run_dir = tmp_path / "run"
    res = gamut("slurm", "--config", cfg, "--submit")
    assert res.exit_code == 0, res.output
    subs = json.loads((run_dir / "slurm" / "jobs.json").read_text())["submissions"][-1]["jobs"]
    server = next(j["job_id"] for j in subs if j["key"] == "judge.j.server")
    try:
        wait_until_gone([server], timeout=180)  # the time limit is 10 minutes
        log = next((run_dir / "slurm" / "logs").glob(f"*judge.j.server-{server}.out")).read_text()
        assert "no judging task of j is queued or running" in log, log
        assert "serving j at http://127.0.0.1:" in log  # it did serve first
        st = gamut("status", "--config", cfg)
        assert "FAILED" in st.output, st.output
    finally:
        subprocess.run(["scancel", *job_ids(run_dir)], timeout=30)
