"""`gamut-local plan`: request counts, prompt tokens with and without prefix sharing, GPU-hours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gamut_local.cluster.plan import plan_run
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
    gen, judge = result.rows
    # Generation prompts: system 2 + question (5 / 10; text_only q2 3) + image 50 on q1 multimodal.
    assert (gen.requests, gen.prompt_tokens, gen.prompt_tokens_shared, gen.output_tokens) \
        == (4, 81, 77, 400)
    assert gen.gpu_hours == pytest.approx((77 / 1000 + 400 / 100) / 3600)
    # One array of 2 shards, each answering both variants: 2 tasks, 2 loads of a TP-2 model.
    assert (gen.job, gen.gpus_per_task, gen.tasks, gen.loads) == ("generate.m", 2, 2, 2)
    assert gen.hours_per_task == pytest.approx(gen.gpu_hours / 2 / 2)
    # One judge engine grades both systems. Full prompts: instructions 40 + question + answer 100
    # + label 2 per check, then the check: multimodal q1 2 x 147 + 4, q2 152 + 4; text_only q1
    # 2 x 147 + 4, q2 (its own text, 3 tokens) 145 + 4.
    assert (judge.job, judge.targets) == ("judge.j", ["m.multimodal", "m.text_only"])
    assert (judge.requests, judge.prompt_tokens, judge.output_tokens) == (6, 298 + 156 + 298 + 149, 6 * 2)
    # Shared: each (question, variant) prefix once, each answer once, checks and labels per
    # request, the instructions once per task (3 tasks).
    shared = (5 + 100 + 4 + 4) + (10 + 100 + 2 + 4) + (5 + 100 + 4 + 4) + (3 + 100 + 2 + 4) + 3 * 40
    assert judge.prompt_tokens_shared == shared
    assert judge.gpu_hours == pytest.approx(shared / 1000 / 3600)  # the label is charged as prefill
    assert (judge.tasks, judge.loads, judge.gpus_per_task) == (3, 3, 1)
    assert result.totals["judge"].requests == 6 and result.checks == 3
    assert result.totals["judge"].tasks == 3 and result.totals["generate"].loads == 2
    assert result.questions_with_image == 1
    assert result.shards == {"generate": {"m": 2}, "judge": {"j": 3}}


def test_a_judge_that_sees_the_image_pays_for_it_once_per_question(tmp_path):
    path = _tiny_run(tmp_path)
    base = plan_run(path).rows[1]
    run = yaml.safe_load(path.read_text())
    run["judges"][0]["sees_image"] = True
    run["extra_answers"] = ["ref.jsonl"]  # a second system answering q1 in the multimodal variant
    (tmp_path / "ref.jsonl").write_text(json.dumps(
        {"question_id": "q1", "model": "ref", "variant": "multimodal", "response": "r" * 40}) + "\n")
    path.write_text(yaml.safe_dump(run))
    judge = plan_run(path).rows[1]
    assert judge.targets == ["m.multimodal", "m.text_only", "ref.multimodal"]
    # q1's image: in every multimodal request's full prompt (2 of m's, 2 of ref's), computed once.
    ref_full = 2 * (40 + 5 + 50 + 10 + 2) + 4
    assert judge.prompt_tokens == base.prompt_tokens + 2 * 50 + ref_full
    assert judge.prompt_tokens_shared == base.prompt_tokens_shared + 50 + (10 + 2 * 2 + 4)


def test_fixed_means_throughput_scale_and_time_limit(gamut, tmp_path):
    base = plan_run(_tiny_run(tmp_path))
    fixed = plan_run(_tiny_run(tmp_path, mean_question_tokens=7, mean_check_tokens=1,
                               throughput_scale={"m": 0.5}))
    gen, judge = fixed.rows
    assert gen.prompt_tokens == 4 * (2 + 7) + 50
    assert judge.prompt_tokens == 2 * (3 * (40 + 7 + 100 + 2) + 3 * 1)
    assert gen.gpu_hours == pytest.approx(2 * (gen.prompt_tokens_shared / 1000 + 4) / 3600)
    # The scale is per name: the judge `j` keeps the base rates.
    assert judge.gpu_hours == pytest.approx(judge.prompt_tokens_shared / 1000 / 3600)
    assert not any(r.over_time_limit for r in base.rows)
    path = _tiny_run(tmp_path, decode_tokens_per_s_per_gpu=0.04)  # 400 answer tokens: 2.78 GPU-h
    run = yaml.safe_load(path.read_text())
    run["slurm"].update(time_generate="1:00:00", shards_generate=1)  # 2.78 GPU-h / 2 GPUs > 1 h
    path.write_text(yaml.safe_dump(run))
    assert [r.over_time_limit for r in plan_run(path).rows] == [True, False]
    res = gamut("plan", "--config", path)
    assert res.exit_code == 0 and ">limit" in res.output
    # Left to the plan, the count is raised until a task ends within the limit: 2 tasks of 0.69 h.
    del run["slurm"]["shards_generate"]
    path.write_text(yaml.safe_dump(run))
    gen = plan_run(path).rows[0]
    assert gen.tasks == 2 and gen.hours_per_task == pytest.approx(400 / 0.04 / 3600 / 2 / 2, rel=0.01)
    assert not gen.over_time_limit


def test_plan_on_the_bundled_sample(gamut):
    if not SAMPLE.is_file():
        pytest.skip("configs/runs/sample.yaml not present")
    spec = load_run_config(SAMPLE)
    questions = load_questions(spec.dataset, check_images=False)
    checks = {r["question_id"]: len(r["checks"]) for r in compile_dataset(questions)}
    given = [rec for p in spec.extra_answers for _, rec in read_jsonl(p)]
    res = gamut("plan", "--config", SAMPLE, "--json")
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
    table = gamut("plan", "--config", SAMPLE)
    assert table.exit_code == 0 and "GPU-hours in all" in table.output


def test_plan_reads_a_release_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    from tests.support.release import write_release

    write_release(tmp_path / "test.parquet")
    run = {"name": "rel", "dataset": "test.parquet", "output_dir": "out", "variants": ["text_only"],
           "models": [{"name": "m", "path": "/m"}], "judges": [{"name": "j", "path": "/j"}]}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    result = plan_run(tmp_path / "run.yaml")
    assert result.checks == 7 and result.totals["judge"].requests == 7


def test_bad_dataset_is_a_clean_error(gamut, tmp_path):
    (tmp_path / "q.jsonl").write_text('{"question_id": "q1"}\n')
    run = {"name": "bad", "dataset": "q.jsonl", "output_dir": "out",
           "models": [{"name": "m", "path": "/m"}], "judges": [{"name": "j", "path": "/j"}]}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    res = gamut("plan", "--config", tmp_path / "run.yaml")
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
    assert result.load_minutes == {"m": 1.0, "j": 3.0}  # j: 1 min + 4 GB at 2 GB/min
    (tmp_path / "free").mkdir()
    base = plan_run(_tiny_run(tmp_path / "free"))  # no start-up, no weights
    row, without = result.rows[1], base.rows[1]  # the judge: 3 tasks, 1 GPU
    assert row.load_gpu_hours == pytest.approx(3 * 3 / 60)
    assert row.gpu_hours == pytest.approx(without.gpu_hours + 3 * 3 / 60)
    assert row.hours_per_task == pytest.approx(without.hours_per_task + 3 / 60)
    gen = result.rows[0]  # 2 tasks, 2 GPUs each, 1 minute each
    assert gen.load_gpu_hours == pytest.approx(2 * 2 * 1 / 60)
    assert result.totals["judge"].load_share == pytest.approx(row.load_gpu_hours / row.gpu_hours)


def test_left_open_the_shard_count_keeps_loading_within_its_share(gamut, tmp_path):
    # The judge's work: 491 prompt tokens at 1000/s = 1.364e-4 GPU-h; one load 0.001 min =
    # 1.667e-5 GPU-h. Loading within 10%: n x L <= 0.1 x (W + n x L), so n <= W / (9 L) = 0.9:
    # one task; within 50%: n <= W / L = 8.2 (the instructions, 40 tokens a task more, aside), but
    # never more tasks than questions: 2.
    path = _tiny_run(tmp_path, startup_minutes=0.001, throughput_scale={"m": 1, "j": 1})
    run = yaml.safe_load(path.read_text())
    del run["slurm"]["shards_judge"]
    path.write_text(yaml.safe_dump(run))
    assert plan_run(path).shards["judge"] == {"j": 1}
    half = plan_run(_with(path, plan={"max_load_share": 0.5}))
    judge = half.rows[1]
    assert half.shards["judge"] == {"j": 2} and judge.load_gpu_hours <= 0.5 * judge.gpu_hours
    # A per-name count wins for that name; a fixed count past the share is warned, with the plan's.
    fixed = plan_run(_with(path, plan={"max_load_share": 0.1}, slurm={"shards_judge": {"j": 10}}))
    assert fixed.shards["judge"] == {"j": 10}
    assert [w for w in fixed.warnings if w.startswith("judge j:")] == [
        "judge j: loading the weights takes 0.000167 of 0.000303 GPU-h (55%) in 10 tasks (slurm.shards_judge); "
        "1 would keep it within plan.max_load_share: leave the count unset for j"]
    res = gamut("plan", "--config", _with(path, slurm={"shards_judge": None}))
    assert res.exit_code == 0 and "1 tasks, 1 engine loads" in res.output
    # A name the run does not have is refused, naming the setting.
    res = gamut("plan", "--config", _with(path, slurm={"shards_judge": {"jj": 2}}))
    assert res.exit_code == 1 and "slurm.shards_judge: no judge of the run is named 'jj'" in res.output


def test_a_missing_throughput_scale_or_model_folder_is_a_warning_naming_what_was_assumed(gamut, tmp_path):
    path = _tiny_run(tmp_path, weights_gb={})
    warnings = plan_run(path).warnings
    assert ("plan.throughput_scale has no entry for m, j: each assumed as fast as an 8B dense model (1.0)"
            in warnings)
    assert f"{path}:9: models.0.path: model folder not found: /m (a submission refuses this)" in warnings
    assert "m: weights not found to measure; assumed 16 GB (set plan.weights_gb.m)" in warnings
    res = gamut("plan", "--config", path)
    assert res.exit_code == 0 and "warning: plan.throughput_scale has no entry for m, j" in res.output
    scaled = plan_run(_with(path, plan={"throughput_scale": {"m": 1, "j": 2}})).warnings
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
    assert result.dataset_shape == "release" and result.questions == RELEASE_QUESTIONS == 1813
    assert result.checks == round(PAPER_CHECKS * RELEASE_QUESTIONS) == result.totals["judge"].requests
    assert result.questions_with_image == RELEASE_QUESTIONS
    assert result.warnings[0].startswith(f"{tmp_path / 'data' / 'gamut.jsonl'} is not downloaded yet")
    assert f"questions and checks of 30 and {RELEASE_CHECK_TOKENS} tokens" in result.warnings[0]
    res = gamut("plan", "--config", tmp_path / "run.yaml")
    assert res.exit_code == 0 and "planned on the GAMUT release's shape" in res.output
    # Any other missing dataset is a typo, not a download to come.
    run["dataset"] = "data/gamut.jsonll"
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    res = gamut("plan", "--config", tmp_path / "run.yaml")
    assert res.exit_code == 1 and "gamut.jsonll" in res.output and "release's shape" not in res.output


def test_the_paper_run_loads_each_engine_a_few_times_and_mostly_computes():
    """configs/runs/paper-open.yaml on 8-GPU nodes, before the download (the release's shape):
    the judge loaded at most 8 times, each candidate at most twice, the judge stage at most 15
    GPU-h with loading at most 20% of it; and the plan's tasks are the graph's."""
    from gamut_local.cluster.slurm import prepare

    cfg = ROOT / "configs" / "runs" / "paper-open.yaml"
    result = plan_run(cfg)
    judge, gen = result.totals["judge"], result.totals["generate"]
    assert load_run_config(cfg).slurm.gpus_per_node == 8
    assert judge.loads <= 8 and judge.gpu_hours <= 15 and judge.load_share <= 0.2
    assert all(r.loads <= 2 for r in result.rows if r.stage == "generate")
    assert gen.loads == sum(r.tasks for r in result.rows if r.stage == "generate")
    # The rows are the rendered graph's jobs: the same keys, tasks and loads.
    jobs = {j.key: j for j in prepare(cfg, check_inputs=False).jobs}
    for row in result.rows:
        job = jobs[row.job]
        assert (row.tasks, row.loads, row.gpus_per_task) == (len(job.tasks), job.loads, job.gpus)
    assert {j.key for j in jobs.values() if j.engine} == {r.job for r in result.rows}
