"""`gamut-local verdicts import|export`: JSON Lines only at the store's edges (the bad-verdict
corpus through import: tests/data/test_verdict_table.py)."""

import json

import pytest

from gamut_local.data import verdict_table as vt
from gamut_local.errors import InputError
from gamut_local.rundir.verdict_store import read_unit, to_records

GOOD = {"question_id": "q1", "model": "m", "variant": "multimodal", "judge": "j", "check_id": "c1",
        "tier": "answer_critical", "verdict": "meets", "raw": "'meets'=0.9000",
        "probs": {"meets": 0.9, "partially_meets": 0.05, "missing": 0.03, "contradicts": 0.02},
        "settings_hash": "abc", "attempts": 1}


def line(**changes) -> str:
    return json.dumps({k: v for k, v in {**GOOD, **changes}.items() if v is not ...})


def lines(*rows) -> bytes:
    return ("\n".join(rows) + "\n").encode()

def test_import_twice_adds_nothing_and_export_gives_the_records_back(gamut, tmp_path):
    path = tmp_path / "v.jsonl"
    recs = [json.loads(line(check_id=f"c{k}", note={"k": k})) for k in range(5)]
    path.write_bytes(lines(*(json.dumps(r) for r in recs)))
    run = tmp_path / "run"
    for added in (5, 0):
        r = gamut("verdicts", "import", path, "--into", run)
        assert r.exit_code == 0 and f"{added} verdicts imported" in r.output, r.output
    unit = run / "verdicts" / "j" / "m.multimodal.parquet"
    assert read_unit(unit).num_rows == 5 and unit.is_file()
    for out in (tmp_path / "all.jsonl", tmp_path / "all.parquet"):
        r = gamut("verdicts", "export", run, "--out", out)
        assert r.exit_code == 0 and "5 verdicts" in r.output, r.output
    back = [json.loads(x) for x in (tmp_path / "all.jsonl").read_text().splitlines()]
    full = {"raw": None, "probs": None, "method": None, "prompt_tokens": None, "num_cached_tokens": None,
            "attempts": None, "settings_hash": None, "check_hash": None, "answer_hash": None}
    assert back == [{**full, **r} for r in recs]
    assert to_records(read_unit(tmp_path / "all.parquet")) == back
    # Export refuses to overwrite an input.
    r = gamut("verdicts", "export", path, "--out", path)
    assert r.exit_code == 1 and "is also an input" in r.output


def test_commands_take_store_folders_and_jsonl_alike(gamut, tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_bytes(lines(line(), line(check_id="c2", verdict="missing")))
    b = tmp_path / "b.jsonl"
    b.write_bytes(lines(line(judge="k", settings_hash="k1"), line(judge="k", check_id="c2", settings_hash="k1")))
    run = tmp_path / "run"
    assert gamut("verdicts", "import", a, "--into", run).exit_code == 0
    from_store = tmp_path / "s1.json"
    from_files = tmp_path / "s2.json"
    assert gamut("score", run / "verdicts", b, "--out", from_store).exit_code == 0
    assert gamut("score", a, b, "--out", from_files).exit_code == 0
    got = [{k: m[k] for k in ("judge", "model", "gamut_score", "verdict_counts")} for m in json.loads(from_store.read_text())["models"]]
    want = [{k: m[k] for k in ("judge", "model", "gamut_score", "verdict_counts")} for m in json.loads(from_files.read_text())["models"]]
    assert got == want and len(got) == 2


def test_a_store_file_of_another_schema_version_is_refused_by_every_reader(tmp_path):
    import pyarrow.parquet as pq

    from gamut_local.rundir import verdict_store as vs

    unit = tmp_path / "verdicts" / "j" / "m.multimodal.parquet"
    table = vs.to_table([json.loads(line())])
    unit.parent.mkdir(parents=True)
    pq.write_table(table.replace_schema_metadata({vs.META_KEY: json.dumps({"schema_version": 2})}), unit)
    with pytest.raises(InputError) as e:
        vt.read_verdicts([tmp_path])
    assert f"{unit}: schema_version: has verdict-store schema version 2" in str(e.value)


def test_import_refuses_a_judges_other_settings_than_the_run_holds(gamut, tmp_path):
    run = tmp_path / "run"
    first, other = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(lines(line()))
    # Another model of the same judge, graded under other settings: a mix the readers would
    # refuse later, so import refuses it now, naming the first such line, and writes nothing.
    other.write_bytes(lines(line(model="m2", settings_hash="xyz"), line(model="m2", check_id="c2", settings_hash="xyz")))
    assert gamut("verdicts", "import", first, "--into", run).exit_code == 0
    held = run / "verdicts" / "j" / "m.multimodal.parquet"
    before = sorted(p.name for p in (run / "verdicts").rglob("*"))
    r = gamut("verdicts", "import", other, "--into", run)
    assert r.exit_code == 1, r.output
    assert (f"{other}:1: settings_hash: judge 'j' has verdicts made under other settings: 'xyz' here, "
            f"'abc' at {held}:1") in r.output, r.output
    assert sorted(p.name for p in (run / "verdicts").rglob("*")) == before
    # The same judge under the settings the run holds is welcome.
    other.write_bytes(lines(line(model="m2")))
    assert gamut("verdicts", "import", other, "--into", run).exit_code == 0
    assert vt.read_verdicts([run]).settings_hashes == ["abc"]


def test_importing_an_old_runs_own_jsonl_converts_it_once(gamut, tmp_path):
    """An old run (verdicts as JSONL in its own folder) imported into itself: the model judge's
    files move into the store and are renamed `.imported`, as the judge stage adopts one; a
    person's files stay where they are. Every reader then counts each verdict once (the JSONL
    and the store side by side were refused as duplicates before)."""
    run = tmp_path / "run"
    judged = run / "verdicts" / "j" / "m.multimodal.jsonl"
    human = run / "verdicts" / "human-ann" / "m.multimodal.jsonl"
    for path, judge in ((judged, "j"), (human, "human-ann")):
        path.parent.mkdir(parents=True)
        path.write_bytes(lines(line(judge=judge), line(judge=judge, check_id="c2", verdict="missing")))
    before = gamut("score", run, "--out", tmp_path / "before.json")
    convert = f"gamut-local verdicts import {run / 'verdicts'}/*/*.jsonl --into {run}"
    assert before.exit_code == 0 and "1 verdict file(s) of an old run" in before.output, before.output
    assert convert in before.output  # the person's file is not an old run's: it stays JSONL
    r = gamut("verdicts", "import", judged, human, "--into", run)
    assert r.exit_code == 0 and "2 verdicts imported" in r.output, r.output
    assert "renamed m.multimodal.jsonl.imported" in r.output and "read where they are" in r.output
    assert not judged.exists() and judged.with_name(judged.name + ".imported").is_file()
    assert human.read_bytes() == lines(line(judge="human-ann"), line(judge="human-ann", check_id="c2", verdict="missing"))
    assert read_unit(run / "verdicts" / "j" / "m.multimodal.parquet").num_rows == 2
    after = gamut("score", run, "--out", tmp_path / "after.json")
    assert after.exit_code == 0 and "old run" not in after.output, after.output
    models = [json.loads((tmp_path / f"{n}.json").read_text())["models"] for n in ("before", "after")]
    assert [(m["judge"], m["verdict_counts"]) for m in models[1]] == [(m["judge"], m["verdict_counts"]) for m in models[0]]
    # A file inside the run with a person's and a model judge's verdicts is refused whole.
    mixed = run / "verdicts" / "j" / "mixed.jsonl"
    mixed.write_bytes(lines(line(model="m3"), line(model="m3", judge="human-ann")))
    r = gamut("verdicts", "import", mixed, "--into", run)
    assert r.exit_code == 1 and f"{mixed}: judge: holds a person" in r.output and mixed.is_file(), r.output


def test_import_into_a_file_and_export_to_an_unknown_suffix_are_refused(gamut, tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_bytes(lines(line()))
    r = gamut("verdicts", "import", path, "--into", path)
    assert r.exit_code == 1 and f"{path}: --into: exists and is not a directory" in r.output, r.output
    for name in ("v.csv", "v.json", "v"):
        r = gamut("verdicts", "export", path, "--out", tmp_path / name)
        assert r.exit_code == 1 and "give FILE.jsonl or FILE.parquet" in r.output, r.output
        assert not (tmp_path / name).exists()


def test_import_of_another_verdict_for_a_held_key_keeps_the_held_one_and_says_so(gamut, tmp_path):
    """Import adds keys the unit lacks; it does not edit a model judge's verdicts (a person's
    correction is a human verdict). A held key given with another verdict was skipped without
    a word, so a re-judged file seemed imported."""
    run, first, again = tmp_path / "run", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(lines(line(), line(check_id="c2")))
    again.write_bytes(lines(line(verdict="missing"), line(check_id="c2"), line(check_id="c3")))
    assert gamut("verdicts", "import", first, "--into", run).exit_code == 0
    r = gamut("verdicts", "import", again, "--into", run)
    assert r.exit_code == 0 and "1 verdicts imported" in r.output, r.output
    assert ("1 verdict(s) not imported: the unit holds their keys with another verdict (first ('q1', 'm', "
            "'multimodal', 'j', 'c1'): 'meets' held, 'missing' given)") in r.output, r.output
    held = {r["check_id"]: r["verdict"] for r in to_records(read_unit(run / "verdicts" / "j" / "m.multimodal.parquet"))}
    assert held == {"c1": "meets", "c2": "meets", "c3": "meets"}
