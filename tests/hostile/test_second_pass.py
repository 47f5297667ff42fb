"""Second pass over the commands (issue 24): the YAML round trip of `import`, outputs inside
an input folder, lone surrogates in record files, and the class-4 leftovers of the first pass
(release ids and citations, --seed, engine.extra, compare, agree, report's missing inputs).
Each case: a message naming file, field or value, exit 1, nothing written."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def exported(world, expect):
    folder = world.root / "edit"
    expect(0, "export", world.dataset, "--out", folder, inputs_change=True)
    return folder


def test_import_refuses_a_key_given_twice_with_its_line(world, expect, exported):
    first = sorted(exported.glob("*.yaml"))[0]
    first.write_text(first.read_text() + "domain: other\n")
    out = world.root / "rev.jsonl"
    expect(1, "import", exported, "--out", out, named=[first.name, "'domain' appears twice"])
    assert not out.exists()


def test_import_refuses_an_alias_bomb(world, expect, exported):
    first = sorted(exported.glob("*.yaml"))[0]
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdef", "bcdefg"))
    first.write_text(first.read_text() + bomb)
    expect(1, "import", exported, "--out", world.root / "rev.jsonl", named=[first.name, "through its aliases"])


@pytest.mark.parametrize("name", ["0001-q1.yaml", "new.jsonl", "sub/new.jsonl"])
def test_import_out_inside_its_folder_is_refused(world, expect, exported, name):
    (exported / "sub").mkdir()
    before = {p.name: p.read_bytes() for p in exported.glob("*.yaml")}
    expect(1, "import", exported, "--out", exported / name, named=["--out", "inside the input folder"])
    assert {p.name: p.read_bytes() for p in exported.glob("*.yaml")} == before
    assert not (exported / "new.jsonl").exists() and not (exported / "sub" / "new.jsonl").exists()


def test_import_out_beside_its_folder_is_fine(world, expect, exported):
    expect(0, "import", exported, "--out", world.root / "rev.jsonl", inputs_change=True)
    assert (world.root / "rev.jsonl").read_text().count("\n") == 4


def test_draft_out_inside_its_evidence_folder_is_refused(world, expect):
    cfg = world.root / "DRAFT.yaml"
    cfg.write_text("model: {name: cand, path: models/cand}\n")
    (world.root / "ev" / "q1").mkdir(parents=True)
    (world.root / "ev" / "q1" / "s1.md").write_text("# T\n\nSome text.\n")
    expect(1, "draft", world.dataset, "--evidence", world.root / "ev", "--config", cfg,
           "--out", world.root / "ev" / "d.jsonl", named=["inside the input folder"], loads=0)


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


# -- class 4 leftovers ---------------------------------------------------------------------


@pytest.fixture
def release(world):
    pytest.importorskip("pyarrow")
    from gamut_local.testing import release

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


def _scores(world, models) -> object:
    path = world.root / "s.json"
    path.write_text(json.dumps({"models": models}))
    return path


def _m(judge="j", model="m", variant="text_only", score=50.0):
    return {"judge": judge, "model": model, "variant": variant, "gamut_score": score}


@pytest.mark.parametrize("bad, field", [(_m(judge=["j"]), "models.1.judge"), (_m(model={"a": 1}), "models.1.model"),
                                        (_m(variant=3), "models.1.variant"), (_m(score=True), "models.1.gamut_score"),
                                        (_m(judge=""), "models.1.judge")])
def test_compare_names_a_field_of_the_wrong_type(world, expect, bad, field):
    path = _scores(world, [_m(variant="multimodal"), bad])
    expect(1, "compare", path, "--out", world.root / "c.json", named=["s.json", field])
    assert not (world.root / "c.json").exists()


def test_compare_refuses_one_system_scored_twice(world, expect):
    path = _scores(world, [_m(variant="multimodal"), _m(score=40.0), _m(score=60.0)])
    expect(1, "compare", path, "--out", world.root / "c.json",
           named=["s.json", "models.2", "appears twice", "first at models.1"])
    assert not (world.root / "c.json").exists()


def test_compare_refuses_a_scores_file_with_a_repeated_key(world, expect):
    (world.root / "s.json").write_text('{"models": [], "models": []}')
    expect(1, "compare", world.root / "s.json", named=["s.json", "'models' appears twice"])


def test_agree_with_a_single_judge_is_an_error(world, expect):
    a = world.verdicts(world.root / "a.jsonl", judge="gold", qids=("q1", "q2"))
    b = world.verdicts(world.root / "b.jsonl", judge="gold", qids=("q3", "q4"))
    out = world.root / "agree.json"
    expect(1, "agree", a, b, "--out", out, named=["a.jsonl", "b.jsonl", "only one judge (gold)"])
    assert not out.exists()


def test_report_refuses_a_missing_extra_verdict_file_unless_told(world, expect):
    gold = world.verdicts(world.root / "gold.jsonl", model="cand")
    expect(0, "run", "--config", world.config(extra_verdicts=[str(gold)]), inputs_change=True)
    report = world.run_dir / "report.md"
    before = report.read_bytes()
    gold.unlink()
    expect(1, "report", world.run_dir, named=["manifest.json", "extra_verdicts.0", "gold.jsonl",
                                              "--allow-missing-verdicts"])
    assert report.read_bytes() == before
    out = expect(0, "report", world.run_dir, "--allow-missing-verdicts", named=["warning:", "gold.jsonl"],
                 inputs_change=True)
    assert "its judge's verdicts are not in this report" in out
    first = report.read_text().splitlines()[0]
    assert first.startswith("> **Warning:**") and "gold.jsonl" in first


def test_a_large_yaml_without_aliases_is_not_taken_for_an_alias_bomb():
    """The alias bound counts what aliases add, not the document's size: an exported rubric of
    tens of thousands of items reads back; a bomb of the same size is refused."""
    import yaml

    from gamut_local.config import MAX_YAML_NODES, load_yaml_node

    n = MAX_YAML_NODES // 4  # five nodes each: more nodes than the bound, and no alias
    big = "items:\n" + "".join(f"- {{id: i{k}, fact: f{k}}}\n" for k in range(n))
    assert len(load_yaml_node(big)[1]["items"]) == n
    bomb = "a: &a [" + ", ".join(["x"] * 10) + "]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcd", "bcde"))
    with pytest.raises(yaml.YAMLError, match="through its aliases"):
        load_yaml_node(bomb)
