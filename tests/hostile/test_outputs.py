"""Hostile outputs: an --out that is an input (class 1, data loss) and names that would make
a path outside the run (class 2). Every case: exit code, no traceback, the file/field named,
inputs byte-identical."""

from __future__ import annotations

import os

from gamut_local.errors import InputError
from gamut_local.rundir.layout import answers_path, verdicts_path


def test_compile_out_equal_to_the_dataset_is_refused(world, expect):
    expect(1, "compile", world.dataset, "--out", world.dataset, named=["data.jsonl", "--out", "is also an input"])


def test_compile_out_through_a_symlink_to_the_dataset_is_refused(world, expect):
    (world.root / "link.jsonl").symlink_to(world.dataset)
    expect(1, "compile", world.dataset, "--out", world.root / "link.jsonl", named=["is also an input"])


def test_score_out_equal_to_a_verdict_file_is_refused(world, expect):
    v = world.verdicts(world.root / "v.jsonl")
    expect(1, "score", v, "--out", v, named=["v.jsonl", "--out", "is also an input"])


def test_score_out_as_a_hard_link_of_a_verdict_file_is_refused(world, expect):
    v = world.verdicts(world.root / "v.jsonl")
    os.link(v, world.root / "same.json")
    expect(1, "score", v, "--out", world.root / "same.json", named=["is also an input"])


def test_score_out_equal_to_the_dataset_is_refused(world, expect):
    v = world.verdicts(world.root / "v.jsonl")
    expect(1, "score", v, "--dataset", world.dataset, "--out", world.dataset, named=["is also an input"])


def test_score_out_whose_per_response_file_is_an_input_is_refused(world, expect):
    """score also writes OUT's per-response file beside it (s.json -> s.responses.parquet)."""
    v = world.verdicts(world.root / "v.jsonl")
    dataset = world.root / "s.responses.parquet"
    dataset.write_bytes(b"a release the user keeps here")
    expect(1, "score", v, "--dataset", dataset, "--out", world.root / "s.json",
           named=["s.responses.parquet", "--out (per-response file)", "is also an input"])


def test_agree_out_equal_to_the_second_input_is_refused(world, expect):
    a = world.verdicts(world.root / "a.jsonl", judge="ja")
    b = world.verdicts(world.root / "b.jsonl", judge="jb")
    expect(1, "agree", a, b, "--out", b, named=["b.jsonl", "is also an input"])


def test_compare_out_equal_to_its_scores_file_is_refused(world, expect):
    v = world.verdicts(world.root / "v.jsonl")
    expect(0, "score", v, "--out", world.root / "scores.json", inputs_change=True)
    expect(1, "compare", world.root / "scores.json", "--out", world.root / "scores.json",
           named=["is also an input"])


def test_out_that_is_a_directory_is_refused_before_work(world, expect):
    (world.root / "outdir").mkdir()
    expect(1, "compile", world.dataset, "--out", world.root / "outdir", named=["outdir", "is a directory"])


def test_out_under_a_file_is_refused(world, expect):
    expect(1, "compile", world.dataset, "--out", world.dataset / "x.jsonl",
           named=["data.jsonl is not a directory"])


def test_report_dataset_inside_its_tables_folder_is_refused(world, expect):
    (world.run_dir / "tables").mkdir(parents=True)
    ds = world.run_dir / "tables" / "data.jsonl"
    ds.write_bytes(world.dataset.read_bytes())
    expect(1, "report", world.run_dir, "--dataset", ds, named=["tables", "contains the input"])


def test_report_dataset_inside_its_scores_folder_is_refused(world, expect):
    (world.run_dir / "scores").mkdir(parents=True)
    ds = world.run_dir / "scores" / "data.jsonl"
    ds.write_bytes(world.dataset.read_bytes())
    expect(1, "report", world.run_dir, "--dataset", ds, named=["scores", "contains the input"])


def test_extra_verdicts_inside_the_runs_verdict_folder_are_refused(world, expect):
    v = world.verdicts(world.run_dir / "verdicts" / "gold" / "ref.text_only.jsonl")
    cfg = world.config(extra_verdicts=[str(v)])
    expect(1, "run", "--config", cfg, named=["extra_verdicts.0", "inside output_dir"], loads=0)


def test_output_dir_that_is_a_file_is_refused(world, expect):
    (world.root / "runfile").write_text("x")
    cfg = world.config(output_dir="runfile")
    expect(1, "run", "--config", cfg, named=["output_dir", "is not a directory"], loads=0)


def test_output_dir_under_a_file_is_refused(world, expect):
    cfg = world.config(output_dir="data.jsonl/run")
    expect(1, "generate", "--config", cfg, named=["output_dir", "data.jsonl is not a directory"], loads=0)


# -- class 2: names from any source that would leave the run directory ------------------


def _outside(world) -> set:
    return {p.name for p in world.root.parent.iterdir()}


def test_extra_answers_model_name_with_dots_never_becomes_a_path(world, expect):
    a = world.answers(world.root / "ref.jsonl", model="../../../x")
    cfg = world.config(extra_answers=[str(a)])
    before = _outside(world)
    expect(1, "judge", "--config", cfg, named=["ref.jsonl:1", "model", "String should match pattern"], loads=0)
    assert _outside(world) == before and not world.run_dir.exists()


def test_extra_answers_bad_name_fails_run_before_the_candidate_loads(world, expect):
    a = world.answers(world.root / "ref.jsonl", model="a/b")
    expect(1, "run", "--config", world.config(extra_answers=[str(a)]), named=["ref.jsonl:1", "model"], loads=0)
    assert not world.run_dir.exists()


def test_verdict_judge_name_with_a_slash_is_refused_by_score(world, expect):
    v = world.verdicts(world.root / "v.jsonl", judge="../evil")
    expect(1, "score", v, "--out", world.root / "s.json", named=["v.jsonl:1", "judge"])
    assert not (world.root / "s.json").exists()


def test_config_model_name_that_is_a_path_is_refused(world, expect):
    cfg = world.config(models=[{"name": "../../x", "path": "models/cand", "vision": False}])
    expect(1, "generate", "--config", cfg, named=["run.yaml", "models.0.name"], loads=0)


def test_config_reference_that_is_a_path_is_refused(world, expect):
    (world.root / "evil.yaml").write_text("name: j\npath: models/judge\n")
    cfg = world.config(judges=["../../evil", "../evil"])
    expect(1, "judge", "--config", cfg, named=["judges.0", "judges.1", "is not a config name"], loads=0)


def test_run_name_that_is_a_path_is_refused(world, expect):
    expect(1, "slurm", "--config", world.config(name="../../jobs"), "--dry-run", named=["run.yaml", "name"])


def test_slurm_dry_run_refuses_extra_answer_names_that_leave_the_scripts_folder(world, expect):
    a = world.answers(world.root / "ref.jsonl", model="../../../etc")
    out = expect(1, "slurm", "--config", world.config(extra_answers=[str(a)]), "--dry-run", named=["ref.jsonl:1", "model"])
    assert "#!/bin/bash" not in out


def test_result_paths_refuse_unsafe_names_whoever_builds_them(world):
    for bad in ("..", "../x", "a/b", "", ".hidden", "x" * 200):
        for build, args in ((answers_path, (bad, "text_only")), (verdicts_path, (bad, "m", "text_only")),
                            (verdicts_path, ("j", bad, "text_only"))):
            try:
                build(world.run_dir, *args)
            except InputError as e:
                assert "cannot be used in a file name" in str(e)
            else:
                raise AssertionError(f"{bad!r} made a path")


def test_paths_that_look_like_console_markup_are_printed_as_they_are(world, expect):
    """The console read `[/x]` in an output path as a closing tag: the command failed after
    writing its file (exit 2, "internal error"); `[bold]` vanished from the path it showed,
    and `:fire:` became an emoji. Paths and names are printed as they are."""
    a = world.verdicts(world.root / "a.jsonl", judge="ja")
    b = world.verdicts(world.root / "b.jsonl", judge="jb")
    for folder in ("[/x]", "[bold]b", "q:fire:"):
        out_path = world.root / folder / "agreement.json"
        expect(0, "agree", a, b, "--out", out_path, named=[f"{out_path}: 2 judges on"], inputs_change=True)
        assert out_path.is_file()
