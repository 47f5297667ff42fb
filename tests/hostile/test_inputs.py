"""Hostile inputs: configs, datasets, images and records that used to be accepted silently
(class 4), failed only after a model loaded (class 5) or ended in a traceback (class 6).
Every case: exit code, no traceback, the file/field named, inputs byte-identical, and
(where a model would load) nothing loaded. Also: lone surrogates in record files, release
ids and citations, --seed and engine.extra."""

from __future__ import annotations

import io
import json
import os
import time

import pytest
from PIL import Image


def _image(path, fmt="PNG", size=(64, 48)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buf, fmt)
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


# -- numbers a config must bound (class 4 / 6) ------------------------------------------

@pytest.mark.parametrize("over, field", [
    ({"engine": {"tensor_parallel_size": -2}}, "models.0.engine.tensor_parallel_size"),
    ({"engine": {"tensor_parallel_size": 0}}, "models.0.engine.tensor_parallel_size"),
    ({"sampling": {"max_tokens": -5}}, "models.0.sampling.max_tokens"),
    ({"sampling": {"seed": -1}}, "models.0.sampling.seed"),
    ({"nodes": 0}, "models.0.nodes"),
    ({"gpus": 0}, "models.0.gpus"),
    ({"engine": {"gpu_memory_utilization": 1.5}}, "models.0.engine.gpu_memory_utilization"),
])
def test_model_numbers_out_of_bounds_are_refused(world, expect, over, field):
    cfg = world.config(models=[{"name": "cand", "path": "models/cand", "vision": False, **over}])
    expect(1, "generate", "--config", cfg, named=["run.yaml", field], loads=0)


@pytest.mark.parametrize("over, field", [
    ({"seed": -1}, "seed"),
    ({"chunk_size": 0}, "chunk_size"),
    ({"slurm": {"time_judge": "banana"}}, "slurm.time_judge"),
    ({"slurm": {"mem_per_gpu": "lots"}}, "slurm.mem_per_gpu"),
    ({"slurm": {"gpus_per_node": 0}}, "slurm.gpus_per_node"),
    ({"plan": {"chars_per_token": 0}}, "plan.chars_per_token"),
    ({"plan": {"decode_tokens_per_s_per_gpu": -1}}, "plan.decode_tokens_per_s_per_gpu"),
])
def test_run_numbers_out_of_bounds_are_refused_by_plan_and_slurm(world, expect, over, field):
    cfg = world.config(**over)
    expect(1, "plan", "--config", cfg, named=["run.yaml", field])
    out = expect(1, "slurm", "--config", cfg, "--dry-run", named=[field])
    assert "#SBATCH" not in out


@pytest.mark.parametrize("argv", [("generate", "--chunk-size", "-5"), ("judge", "--chunk-size", "0"),
                                  ("run", "--chunk-size", "0")])
def test_chunk_size_below_one_is_refused_before_a_model_loads(world, expect, argv):
    expect(1, argv[0], "--config", world.config(), *argv[1:], named=["--chunk-size", "must be a whole number >= 1"],
           loads=0)
    assert not (world.run_dir / "answers").exists()


def test_shard_out_of_range_is_refused(world, expect):
    expect(1, "generate", "--config", world.config(), "--shard", "2/2", named=["--shard"], loads=0)


# -- YAML (class 4 / 6) -----------------------------------------------------------------

def test_yaml_key_given_twice_is_refused_with_its_line(world, expect):
    cfg = world.config(text="name: a\ndataset: data.jsonl\noutput_dir: run\nname: b\njudges: [x]\n")
    expect(1, "plan", "--config", cfg, named=["run.yaml:4", "key 'name' appears twice (first on line 1)"])


def test_yaml_key_given_twice_in_a_flow_mapping_is_refused(world, expect):
    cfg = world.config(text="name: a\ndataset: data.jsonl\noutput_dir: run\n"
                            "judges: [{name: j, name: k, path: models/judge}]\n")
    expect(1, "plan", "--config", cfg, named=["run.yaml:4", "appears twice"])


def test_yaml_alias_bomb_is_refused_quickly(world, expect):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for k, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[k]
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    cfg = world.config(text="\n".join(lines) + "\n")
    t0 = time.perf_counter()
    expect(1, "run", "--config", cfg, named=["run.yaml", "through its aliases"], loads=0)
    assert time.perf_counter() - t0 < 10  # fails fast: it never expands the 9**9 values


def test_yaml_cyclic_alias_is_refused(world, expect):
    cfg = world.config(text="name: &n [*n]\n")
    expect(1, "plan", "--config", cfg, named=["run.yaml", "cycle"])


def test_yaml_that_is_not_a_mapping_or_not_utf8(world, expect):
    expect(1, "plan", "--config", world.config(text="- a\n- b\n"), named=["expected a YAML mapping"])
    (world.root / "bin.yaml").write_bytes(b"name: \xff\xfe\n")
    expect(1, "plan", "--config", world.root / "bin.yaml", named=["bin.yaml", "not valid YAML"])


def test_a_typo_in_a_named_model_config_is_reported_in_that_file(world, expect):
    (world.root / "configs" / "models").mkdir(parents=True)
    model = world.root / "configs" / "models" / "cand.yaml"
    model.write_text("path: ../../models/cand\nvision: false\nengine:\n  max_model_lenght: 4096\n")
    cfg = world.config(models=["cand"])
    for argv in (("plan", "--config", cfg), ("slurm", "--config", cfg), ("run", "--config", cfg)):
        out = expect(1, *argv, named=[f"{model}:4: engine.max_model_lenght: unknown key; did you mean "
                                       "`max_model_len`?"], loads=0)
        assert "run.yaml" not in out and "Extra inputs" not in out
    assert not world.run_dir.exists()


def test_config_path_that_is_a_directory(world, expect):
    (world.root / "cfgdir").mkdir()
    expect(1, "run", "--config", world.root / "cfgdir", named=["cfgdir", "not a file"])


# -- JSON Lines (class 4 / 6) -----------------------------------------------------------

def test_dataset_line_with_a_repeated_key_is_refused(world, expect):
    line = json.dumps(world.question("q9"))[:-1] + ', "domain": "other"}'
    world.dataset.write_text(world.dataset.read_text() + line + "\n")
    expect(1, "validate", world.dataset, named=["data.jsonl:5", "key 'domain' appears twice"])


def test_verdict_line_with_a_repeated_key_is_refused(world, expect):
    v = world.verdicts(world.root / "v.jsonl")
    text = v.read_text().splitlines()
    text[2] = text[2][:-1] + ', "verdict": "missing"}'
    v.write_text("\n".join(text) + "\n")
    expect(1, "score", v, "--out", world.root / "s.json", named=["v.jsonl:3", "key 'verdict' appears twice"])


def test_deeply_nested_json_in_a_dataset_is_a_message(world, expect):
    world.dataset.write_text(world.dataset.read_text() + "[" * 100000 + "]" * 100000 + "\n")
    expect(1, "validate", world.dataset, named=["data.jsonl:5", "nested too deeply"])


def test_deeply_nested_json_in_verdicts_is_a_message(world, expect):
    v = world.verdicts(world.root / "v.jsonl")
    v.write_text(v.read_text() + '{"a": ' + "[" * 100000 + "]" * 100000 + "}\n")
    expect(1, "agree", v, v, "--out", world.root / "a.json", named=["v.jsonl:13", "nested too deeply"])


def test_deeply_nested_scores_json_is_a_message(world, expect):
    (world.root / "s.json").write_text("[" * 100000 + "]" * 100000)
    expect(1, "compare", world.root / "s.json", named=["nested too deeply"])


def test_verdict_file_not_utf8(world, expect):
    v = world.verdicts(world.root / "v.jsonl")
    v.write_bytes(v.read_bytes() + b'{"question_id": "\xff"}\n')
    expect(1, "score", v, "--out", world.root / "s.json", named=["v.jsonl:13", "not valid UTF-8"])


def test_dataset_path_that_is_a_directory(world, expect):
    (world.root / "ds").mkdir()
    expect(1, "validate", world.root / "ds", named=["ds", "not a file"])


def test_dataset_torn_last_line_is_an_error_not_skipped(world, expect):
    world.dataset.write_text(world.dataset.read_text() + '{"question_id": "q9", "dom')
    expect(1, "validate", world.dataset, named=["data.jsonl:5", "not valid JSON"])


def test_two_snippets_sharing_an_id_are_refused(world, expect):
    q = {"question_id": "s1", "domain": "d", "question": "What?", "meta_rubric": {
        "items": [{"id": "i1", "type": "simple", "tier": "answer_critical", "fact": "f", "evidence": ["s"]}],
        "snippets": [{"id": "s", "title": "A", "text": "a"}, {"id": "s", "title": "B", "text": "b"}]}}
    world.write_jsonl(world.dataset, [q])
    expect(1, "compile", world.dataset, "--out", world.root / "r.jsonl", named=["data.jsonl:1", "snippet ids must be unique"])
    assert not (world.root / "r.jsonl").exists()


# -- images (class 4 / 5 / 6) -----------------------------------------------------------

def test_truncated_jpeg_fails_validate_and_generate_before_the_model(world, expect):
    data = _image(world.root / "full.jpg", "JPEG", (256, 256))
    (world.root / "cut.jpg").write_bytes(data[: len(data) // 2])
    world.write_jsonl(world.dataset, [world.question("q1", image="cut.jpg")])
    expect(1, "validate", world.dataset, named=["data.jsonl:1", "image", "cannot be opened"])
    cfg = world.config(models=[{"name": "cand", "path": "models/cand"}], variants=["multimodal"])
    expect(1, "generate", "--config", cfg, named=["data.jsonl:1", "image"], loads=0)
    assert not world.run_dir.exists()


def test_image_symlink_loop_is_a_message(world, expect):
    (world.root / "loop-a.png").symlink_to(world.root / "loop-b.png")
    (world.root / "loop-b.png").symlink_to(world.root / "loop-a.png")
    world.write_jsonl(world.dataset, [world.question("q1", image="loop-a.png")])
    expect(1, "validate", world.dataset, named=["data.jsonl:1", "image", "loop"])


def test_image_that_is_not_an_image(world, expect):
    (world.root / "fake.png").write_text("not a picture")
    world.write_jsonl(world.dataset, [world.question("q1", image="fake.png")])
    expect(1, "validate", world.dataset, named=["data.jsonl:1", "image", "cannot be opened"])


# -- failing late (class 5) ---------------------------------------------------------------

def test_run_checks_extra_answers_against_the_dataset_before_generating(world, expect):
    a = world.answers(world.root / "ref.jsonl", qids=("q1", "nope"))
    expect(1, "run", "--config", world.config(extra_answers=[str(a)]),
           named=["extra_answers", "questions not in the dataset", "nope"], loads=0)
    assert not (world.run_dir / "answers").exists()


def test_run_checks_extra_answer_names_against_the_generated_models(world, expect):
    a = world.answers(world.root / "ref.jsonl", model="cand")
    expect(1, "run", "--config", world.config(extra_answers=[str(a)]),
           named=["extra_answers", "'cand' is used by both"], loads=0)


def test_run_checks_extra_verdicts_against_the_dataset_before_generating(world, expect):
    v = world.verdicts(world.root / "gold.jsonl", qids=("q1", "q7"))
    expect(1, "run", "--config", world.config(extra_verdicts=[str(v)]),
           named=["gold.jsonl:4", "question_id", "'q7' is not in the dataset"], loads=0)


def test_run_checks_the_judge_model_folder_before_the_candidate_loads(world, expect):
    cfg = world.config(judges=[{"name": "judge", "path": "nothere"}])
    expect(1, "run", "--config", cfg, named=["run.yaml", "path", "model folder not found"], loads=0)


def _heads(world, monkeypatch, cand: int, judge: int) -> None:
    """Model folders with these attention heads: the candidate's in its config.json, the judge's
    in a vision-language model's `text_config`. And no SLURM controller answering `sinfo`, so
    `slurm` does not check the requests against a local cluster's nodes first."""
    bin_dir = world.root.parent / f"{world.root.name}-bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'Unable to contact slurm controller' >&2\nexit 1\n")
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (world.root / "models" / "cand" / "config.json").write_text(
        json.dumps({"architectures": ["Fake"], "num_attention_heads": cand}))
    (world.root / "models" / "judge" / "config.json").write_text(
        json.dumps({"architectures": ["Fake"], "text_config": {"num_attention_heads": judge}}))


@pytest.mark.parametrize("argv, named", [
    (["run", "--config", "{cfg}"], ["models.0.engine.tensor_parallel_size: 2 does not divide the model's 9 attention heads",
                                    "judges.0.engine.tensor_parallel_size: 4 does not divide the model's 6 attention heads"]),
    (["generate", "--config", "{cfg}"], ["models.0.engine.tensor_parallel_size: 2", "9 attention heads"]),
    (["judge", "--config", "{cfg}"], ["judges.0.engine.tensor_parallel_size: 4", "6 attention heads"]),
    (["slurm", "--config", "{cfg}", "--dry-run"], ["models.0.engine.tensor_parallel_size: 2", "judges.0.engine.tensor_parallel_size: 4"]),
])
def test_a_tensor_parallel_size_that_does_not_divide_the_heads_is_refused_before_anything_loads(world, expect, monkeypatch,
                                                                                                argv, named):
    """vLLM refuses it only once the engine starts (an internal error, after the queue)."""
    _heads(world, monkeypatch, cand=9, judge=6)
    cfg = world.config(models=[{"name": "cand", "path": "models/cand", "vision": False, "engine": {"tensor_parallel_size": 2}}],
                       judges=[{"name": "judge", "path": "models/judge", "engine": {"tensor_parallel_size": 4}}])
    out = expect(1, *[str(cfg) if a == "{cfg}" else a for a in argv], named=["run.yaml:", *named], loads=0)
    assert "use one of 1, 3, 9" in out or "use one of 1, 2, 3, 6" in out
    assert not (world.run_dir / "answers").exists()


def test_a_tensor_parallel_size_that_divides_the_heads_is_accepted(world, expect, monkeypatch):
    _heads(world, monkeypatch, cand=9, judge=6)
    cfg = world.config(models=[{"name": "cand", "path": "models/cand", "vision": False, "engine": {"tensor_parallel_size": 3}}],
                       judges=[{"name": "judge", "path": "models/judge", "engine": {"tensor_parallel_size": 2}}])
    expect(0, "slurm", "--config", cfg, "--dry-run", named=["#SBATCH --gres=gpu:3", "#SBATCH --gres=gpu:2"])


def test_judge_that_cannot_see_is_refused_before_generating(world, expect):
    cfg = world.config(judges=[{"name": "judge", "path": "models/judge", "vision": False, "sees_image": True}])
    expect(1, "run", "--config", cfg, named=["run.yaml:", "judges.0.sees_image: this judge has vision: false, "
                                             "so it cannot see the image"], loads=0)


def test_every_problem_is_reported_at_once(world, expect):
    a = world.answers(world.root / "ref.jsonl", qids=("zz",))
    cfg = world.config(extra_answers=[str(a)], judges=[{"name": "judge", "path": "nothere"}])
    out = expect(1, "run", "--config", cfg, "--chunk-size", "0", loads=0)
    assert "3 problem(s)" in out and "--chunk-size" in out and "model folder not found" in out


def test_dataset_that_is_a_symlink_loop(world, expect):
    (world.root / "a.jsonl").symlink_to(world.root / "b.jsonl")
    (world.root / "b.jsonl").symlink_to(world.root / "a.jsonl")
    expect(1, "validate", world.root / "a.jsonl", named=["a.jsonl", "leads nowhere"])


@pytest.mark.parametrize("command", ["validate", "lint", "compile"])
def test_a_lone_surrogate_in_a_dataset_is_a_message(world, expect, command):
    rows = world.dataset.read_text().splitlines()
    rows[1] = rows[1].replace('"domain": "d"', '"domain": "d\\udc80"')
    world.dataset.write_text("\n".join(rows) + "\n")
    out = world.root / "rubric.jsonl"
    argv = [command, world.dataset] + (["--out", out] if command == "compile" else [])
    expect(1, *argv, named=["data.jsonl:2", "lone surrogate"])
    assert not out.exists()


def test_a_lone_surrogate_in_verdicts_is_a_message(world, expect):
    v = world.verdicts(world.root / "v.jsonl", raw="x")
    v.write_text(v.read_text().replace('"raw": "x"', '"raw": "\\ud800"', 1))
    expect(1, "score", v, "--out", world.root / "s.json", named=["v.jsonl:1", "lone surrogate"])
    assert not (world.root / "s.json").exists()


@pytest.fixture
def release(world):
    pytest.importorskip("pyarrow")
    from tests.support import release

    return release


def test_a_release_with_a_repeated_session_id_is_refused(world, expect, release):
    rows = release.release_rows() + [release.release_rows()[1]]
    path = release.write_parquet(rows, world.root / "rel.parquet")
    out = world.root / "rubric.jsonl"
    for argv in (["validate", path], ["compile", path, "--out", out], ["lint", path]):
        expect(1, *argv, named=["rel.parquet[row 3]", "session_id", f"duplicate id {release.BRIDGE!r}", "row 1"])
    assert not out.exists()


@pytest.mark.parametrize("citation", [["1", "2"], {"id": "1"}, True])
def test_a_release_citation_that_is_not_one_id_is_refused(world, expect, release, citation):
    rows = release.release_rows()
    for row in rows:  # a parquet column has one type: every row's citations are of it
        for tier in ("Answer_Critical", "Answer Critical"):
            for item in row["rubrics"].get(tier, []):
                item["Specifics"] = [{"Citation": citation, "Quote": "..."}]
    path = release.write_parquet(rows, world.root / "rel.parquet")
    out = world.root / "rubric.jsonl"
    expect(1, "compile", path, "--out", out,
           named=["rel.parquet[row 0]", "Specifics.0.Citation", "expected one snippet id", repr(citation)])
    assert not out.exists()


@pytest.mark.parametrize("seed", ["-1", "-99999999999999999999"])
def test_score_and_report_refuse_a_negative_seed(world, expect, seed):
    v = world.verdicts(world.root / "v.jsonl")
    expect(1, "score", v, "--out", world.root / "s.json", "--seed", seed, named=["--seed", seed])
    assert not (world.root / "s.json").exists()
    expect(1, "report", world.root, "--seed", seed, named=["--seed", seed])


@pytest.mark.parametrize("value, command", [("two", "plan"), ("two", "run"), (0, "plan"), (True, "slurm"),
                                            (2.5, "plan")])
def test_engine_extra_that_gamut_local_reads_is_checked(world, expect, value, command):
    cfg = world.config(models=[{"name": "cand", "path": "models/cand", "vision": False,
                                "engine": {"extra": {"pipeline_parallel_size": value}}}])
    argv = ["--dry-run"] if command == "slurm" else []
    expect(1, command, "--config", cfg, *argv,
           named=["run.yaml", "extra.pipeline_parallel_size", repr(value)], loads=0)
    assert not world.run_dir.exists()
