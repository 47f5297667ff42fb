"""`gamut-local plan`: request counts, prompt tokens with and without prefix sharing, GPU-hours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gamut_local.cluster.cost import plan_run
from gamut_local.config import PROJECT_ROOT, load_run_config
from gamut_local.data.dataset import load_questions
from gamut_local.rubric.compiler import compile_dataset
from gamut_local.rundir.store import read_jsonl

ROOT = PROJECT_ROOT
SAMPLE = ROOT / "configs" / "runs" / "sample.yaml"


def _check(cid: str, text: str) -> dict:
    return {"check_id": cid, "text": text, "tier": "answer_critical"}


def _tiny_run(tmp_path: Path, **plan_changes) -> Path:
    """Two questions whose lengths are whole tokens at 4 characters per token."""
    questions = [
        {"question_id": "q1", "domain": "d", "question": "abcd" * 5, "image": "img.png",
         "checks": [_check("c1", "x" * 8), _check("c2", "y" * 8)]},
        {"question_id": "q2", "domain": "d", "question": "efgh" * 10, "question_text_only": "ijkl" * 3,
         "checks": [_check("c1", "z" * 16)]},
    ]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    plan = {"chars_per_token": 4, "mean_answer_tokens": 100, "image_tokens": 50,
            "judge_instruction_tokens": 40, "judge_output_tokens": 2,
            "prefill_tokens_per_s_per_gpu": 1000, "decode_tokens_per_s_per_gpu": 100,
            "startup_minutes": 0, "weights_gb": {"m": 0, "j": 0}, **plan_changes}  # loading: its own test
    run = {"name": "tiny", "dataset": "q.jsonl", "output_dir": "out",
           "models": [{"name": "m", "path": "/m", "system_prompt": "s" * 8, "engine": {"tensor_parallel_size": 2}}],
           "variants": ["multimodal", "text_only"],
           "judges": [{"name": "j", "path": "/j"}], "plan": plan,
           "slurm": {"shards_generate": 2, "shards_judge": 3}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(run))
    return path


def test_counts_and_tokens_match_a_hand_computation(tmp_path):
    result = plan_run(_tiny_run(tmp_path))
    gen, jmm, jto = result["rows"]
    # Generation prompts: system 2 + question (5 / 10; text_only q2 3) + image 50 on q1 multimodal.
    assert (gen["requests"], gen["prompt_tokens"], gen["prompt_tokens_shared"], gen["output_tokens"]) \
        == (4, 81, 77, 400)
    assert gen["gpu_hours"] == pytest.approx((77 / 1000 + 400 / 100) / 3600)
    assert (gen["gpus_per_task"], gen["tasks"]) == (2, 4)
    assert gen["hours_per_task"] == pytest.approx(gen["gpu_hours"] / 2 / 4)
    # Judge prompts: instructions 40 + question + answer 100 per check, then the check itself.
    assert (jmm["target"], jmm["requests"], jmm["prompt_tokens"], jmm["prompt_tokens_shared"]) \
        == ("m.multimodal", 3, 448, 263)
    assert (jto["target"], jto["requests"], jto["prompt_tokens"], jto["prompt_tokens_shared"]) \
        == ("m.text_only", 3, 441, 256)
    assert jmm["output_tokens"] == 6 and jmm["tasks"] == 3
    assert result["totals"]["judge"]["requests"] == 6 and result["checks"] == 3
    assert result["questions_with_image"] == 1


def test_a_judge_that_sees_the_image_pays_for_it_once_per_response(tmp_path):
    path = _tiny_run(tmp_path)
    run = yaml.safe_load(path.read_text())
    run["judges"][0]["sees_image"] = True
    path.write_text(yaml.safe_dump(run))
    _, jmm, jto = plan_run(path)["rows"]
    assert (jmm["prompt_tokens"], jmm["prompt_tokens_shared"]) == (448 + 2 * 50, 263 + 50)
    assert (jto["prompt_tokens"], jto["prompt_tokens_shared"]) == (441, 256)  # text_only: no image


def test_fixed_means_throughput_scale_and_time_limit(gamut, tmp_path):
    base = plan_run(_tiny_run(tmp_path))
    fixed = plan_run(_tiny_run(tmp_path, mean_question_tokens=7, mean_check_tokens=1,
                               throughput_scale={"m": 0.5}))
    gen, jmm, _ = fixed["rows"]
    assert gen["prompt_tokens"] == 4 * (2 + 7) + 50
    assert jmm["prompt_tokens"] == 2 * (40 + 7 + 100) + 2 + (40 + 7 + 100) + 1
    assert gen["gpu_hours"] == pytest.approx(2 * (gen["prompt_tokens_shared"] / 1000 + 4) / 3600)
    # The scale is per name: the judge `j` keeps the base rates.
    assert jmm["gpu_hours"] == pytest.approx((jmm["prompt_tokens_shared"] / 1000 + 6 / 100) / 3600)
    assert not any(r["over_time_limit"] for r in base["rows"])
    path = _tiny_run(tmp_path, decode_tokens_per_s_per_gpu=0.01)  # 400 answer tokens: 11 GPU-h
    run = yaml.safe_load(path.read_text())
    run["slurm"]["time_generate"] = "1:00:00"  # 11 GPU-h / (2 GPUs x 4 tasks) > 1 h
    path.write_text(yaml.safe_dump(run))
    assert [r["over_time_limit"] for r in plan_run(path)["rows"]] == [True, False, False]
    res = gamut("plan", path)
    assert res.exit_code == 0 and ">limit" in res.output


def test_plan_on_the_bundled_sample(gamut):
    if not SAMPLE.is_file():
        pytest.skip("configs/runs/sample.yaml not present")
    spec = load_run_config(SAMPLE)
    questions = load_questions(spec.dataset, check_images=False)
    checks = {r["question_id"]: len(r["checks"]) for r in compile_dataset(questions)}
    given = [rec for p in spec.extra_answers for _, rec in read_jsonl(p)]
    res = gamut("plan", SAMPLE, "--json")
    assert res.exit_code == 0, res.output
    result = json.loads(res.output)
    n_gen = len(questions) * sum(len([v for v in spec.variants if v != "multimodal" or m.vision])
                                 for m in spec.models)
    assert result["totals"]["generate"]["requests"] == n_gen
    judged = n_gen // len(questions) * sum(checks.values()) + sum(checks[a["question_id"]] for a in given)
    assert result["totals"]["judge"]["requests"] == judged * len(spec.judges)
    assert result["checks"] == sum(checks.values())
    # Judge prompts repeat the instructions and the answer for every check: sharing saves most.
    tot = result["totals"]["judge"]
    assert tot["prompt_tokens_shared"] < 0.5 * tot["prompt_tokens"]
    table = gamut("plan", SAMPLE)
    assert table.exit_code == 0 and "GPU-hours in all" in table.output


def test_plan_reads_a_release_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    from gamut_local.testing.release import write_release

    write_release(tmp_path / "test.parquet")
    run = {"name": "rel", "dataset": "test.parquet", "output_dir": "out", "variants": ["text_only"],
           "models": [{"name": "m", "path": "/m"}], "judges": [{"name": "j", "path": "/j"}]}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    result = plan_run(tmp_path / "run.yaml")
    assert result["checks"] == 7 and result["totals"]["judge"]["requests"] == 7


def test_bad_dataset_is_a_clean_error(gamut, tmp_path):
    (tmp_path / "q.jsonl").write_text('{"question_id": "q1"}\n')
    run = {"name": "bad", "dataset": "q.jsonl", "output_dir": "out",
           "models": [{"name": "m", "path": "/m"}], "judges": [{"name": "j", "path": "/j"}]}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    res = gamut("plan", tmp_path / "run.yaml")
    assert res.exit_code == 1 and "q.jsonl:1: domain" in res.output and "Traceback" not in res.output


def _with(path: Path, **run_changes) -> Path:
    run = yaml.safe_load(path.read_text())
    for key, value in run_changes.items():
        run.setdefault(key, {}).update(value) if isinstance(value, dict) else run.__setitem__(key, value)
    path.write_text(yaml.safe_dump(run))
    return path


def test_every_task_pays_for_start_up_and_loading_measured_on_the_folder(tmp_path):
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with open(folder / "model.safetensors", "wb") as f:
        f.truncate(4 * 10**9)  # 4 GB, sparse
    path = _tiny_run(tmp_path, startup_minutes=1, load_gb_per_minute=2, weights_gb={"m": 0})
    run = yaml.safe_load(path.read_text())
    run["judges"][0]["path"] = str(folder)
    path.write_text(yaml.safe_dump(run))
    result = plan_run(path)
    assert result["load_minutes"] == {"m": 1.0, "j": 3.0}  # j: 1 min + 4 GB at 2 GB/min
    (tmp_path / "free").mkdir()
    base = plan_run(_tiny_run(tmp_path / "free"))  # no start-up, no weights
    for row, without in zip(result["rows"][1:], base["rows"][1:]):  # the judge rows: 3 shards, 1 GPU
        assert row["load_gpu_hours"] == pytest.approx(3 * 3 / 60)
        assert row["gpu_hours"] == pytest.approx(without["gpu_hours"] + 3 * 3 / 60)
        assert row["hours_per_task"] == pytest.approx(without["hours_per_task"] + 3 / 60)
    gen = result["rows"][0]  # 2 shards x 2 variants, 2 GPUs each, 1 minute each
    assert gen["load_gpu_hours"] == pytest.approx(4 * 2 * 1 / 60)


def test_loading_that_outweighs_the_work_is_warned_with_the_shards_that_would_not(gamut, tmp_path):
    # Judge work per answer set (263 or 256 prompt tokens at 1000/s + 6 labels at 100/s) ~8.9e-5
    # GPU-h; a task's loading 0.001 min = 1.7e-5 h: 5 shards fit.
    path = _tiny_run(tmp_path, startup_minutes=0.001, throughput_scale={"m": 1, "j": 1})
    too_many = plan_run(_with(path, slurm={"shards_judge": 10}))["warnings"]
    assert [w for w in too_many if w.startswith("judge j:")] == [
        "judge j: loading the weights takes 0.000333 GPU-h, more than the 0.000178 GPU-h of work, with "
        "slurm.shards_judge: 10; slurm.shards_judge: 5 would not"]
    assert not [w for w in plan_run(_with(path, slurm={"shards_judge": 5}))["warnings"] if w.startswith("judge")]
    res = gamut("plan", _with(path, slurm={"shards_judge": 10}))
    assert res.exit_code == 0 and "slurm.shards_judge: 5 would not" in res.output


def test_a_missing_throughput_scale_or_model_folder_is_a_warning_naming_what_was_assumed(gamut, tmp_path):
    path = _tiny_run(tmp_path, weights_gb={})
    warnings = plan_run(path)["warnings"]
    assert ("plan.throughput_scale has no entry for m, j: each assumed as fast as an 8B dense model (1.0)"
            in warnings)
    assert f"{path}:9: models.0.path: model folder not found: /m (a submission refuses this)" in warnings
    assert "m: weights not found to measure; assumed 16 GB (set plan.weights_gb.m)" in warnings
    res = gamut("plan", path)
    assert res.exit_code == 0 and "warning: plan.throughput_scale has no entry for m, j" in res.output
    scaled = plan_run(_with(path, plan={"throughput_scale": {"m": 1, "j": 2}}))["warnings"]
    assert not [w for w in scaled if "throughput_scale" in w]


def test_the_paper_runs_give_every_model_a_throughput_and_the_same_one():
    paper, sweep = (yaml.safe_load((ROOT / "configs" / "runs" / f"{n}.yaml").read_text())
                    for n in ("paper-open", "judge-sweep"))
    for run in (paper, sweep):
        assert set(run["models"]) | set(run["judges"]) <= set(run["plan"]["throughput_scale"])
    for name in sweep["models"]:
        for key in ("throughput_scale", "weights_gb"):
            assert sweep["plan"][key][name] == paper["plan"][key][name], (key, name)


def test_before_the_download_the_plan_counts_on_the_release_shape(gamut, tmp_path):
    from gamut_local.cluster.cost import RELEASE_CHECK_TOKENS
    from gamut_local.data.gamut_release import RELEASE_QUESTIONS
    from gamut_local.rubric.lint import PAPER_CHECKS

    run = {"name": "early", "dataset": "data/gamut.jsonl", "output_dir": "out", "variants": ["multimodal"],
           "models": [{"name": "m", "path": "/m"}], "judges": [{"name": "j", "path": "/j"}],
           "plan": {"throughput_scale": {"m": 1, "j": 1}, "weights_gb": {"m": 1, "j": 1}}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    result = plan_run(tmp_path / "run.yaml")
    assert result["dataset_shape"] == "release" and result["questions"] == RELEASE_QUESTIONS == 1813
    assert result["checks"] == round(PAPER_CHECKS * RELEASE_QUESTIONS) == result["totals"]["judge"]["requests"]
    assert result["questions_with_image"] == RELEASE_QUESTIONS
    assert result["warnings"][0].startswith(f"{tmp_path / 'data' / 'gamut.jsonl'} is not downloaded yet")
    assert f"questions and checks of 30 and {RELEASE_CHECK_TOKENS} tokens" in result["warnings"][0]
    res = gamut("plan", tmp_path / "run.yaml")
    assert res.exit_code == 0 and "planned on the GAMUT release's shape" in res.output
    # Any other missing dataset is a typo, not a download to come.
    run["dataset"] = "data/gamut.jsonll"
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    res = gamut("plan", tmp_path / "run.yaml")
    assert res.exit_code == 1 and "gamut.jsonll" in res.output and "release's shape" not in res.output
