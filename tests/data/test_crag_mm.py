"""CRAG-MM join on real `datasets.Dataset` objects built in the public CRAG-MM shape."""

from __future__ import annotations

import json

import pytest

datasets = pytest.importorskip("datasets")
pytest.importorskip("pyarrow")

from PIL import Image  # noqa: E402

from gamut_local.config import PROJECT_ROOT  # noqa: E402
from gamut_local.data.crag_mm import (  # noqa: E402
    bound_image,
    build_dataset,
    domain_names,
    fetch_url,
    first_domain,
    image_name,
    join,
    join_keys,
    load_splits,
    parse_bound,
)
from gamut_local.data.dataset import load_questions  # noqa: E402
from gamut_local.data.gamut_release import load_release  # noqa: E402
from gamut_local.errors import InputError  # noqa: E402
from tests.support import processes  # noqa: E402
from tests.support.release import (  # noqa: E402
    BASIL,
    BRIDGE,
    OWL,
    text_only_rows,
    write_parquet,
    write_release,
)


def crag_split(rows: list[dict], names: list[str] | None, *, nested_lists: bool = True):
    """A split like crag-mm-single-turn-public: turns as a dict of lists (Sequence of a dict)
    or, with nested_lists=False, as a list of dicts (datasets' newer List of a dict). With
    names=None, `domain` is a plain integer (no ClassLabel); a row's `domain` is then its number.
    A row may give `interaction_id` (default: `<session_id>-0`)."""
    domain = datasets.Value("int64") if names is None else datasets.ClassLabel(names=names)
    turn = {"interaction_id": datasets.Value("string"), "domain": domain, "query": datasets.Value("string")}
    turns = datasets.Sequence(turn) if nested_lists else datasets.List(turn)
    features = datasets.Features({"session_id": datasets.Value("string"), "image": datasets.Image(),
                                  "image_url": datasets.Value("string"), "turns": turns})
    data = {k: [r[k] for r in rows] for k in ("session_id", "image", "image_url")}
    dom = [r["domain"] if names is None else names.index(r["domain"]) for r in rows]
    inter = [r.get("interaction_id", r["session_id"] + "-0") for r in rows]
    if nested_lists:
        data["turns"] = [{"interaction_id": [i], "domain": [d], "query": ["q"]} for i, d in zip(inter, dom)]
    else:
        data["turns"] = [[{"interaction_id": i, "domain": d, "query": "q"}] for i, d in zip(inter, dom)]
    return datasets.Dataset.from_dict(data, features=features)


def _img(w: int, h: int, color="red"):
    return Image.new("RGB", (w, h), color)


def test_domain_names_come_from_the_features_in_both_layouts():
    rows = [{"session_id": "a", "image": None, "image_url": "", "domain": "plants"}]
    for nested in (True, False):
        split = crag_split(rows, ["food", "plants", "vehicles"], nested_lists=nested)
        names = domain_names(split.features)
        assert names == ["food", "plants", "vehicles"]
        assert first_domain(split[0]["turns"], names) == "plants"
    assert first_domain({"domain": ["shopping"]}, None) == "shopping"
    assert first_domain({"domain": []}, ["food"]) is None and first_domain({"domain": [7]}, ["food"]) is None


def test_a_plain_integer_domain_is_kept_as_its_number():
    for nested in (True, False):
        split = crag_split([{"session_id": "a", "image": None, "image_url": "", "domain": 4}], None,
                           nested_lists=nested)
        assert domain_names(split.features) is None
        assert first_domain(split[0]["turns"], None) == "4"


def test_join_keys_are_session_id_then_interaction_id():
    split = crag_split([{"session_id": "s1", "interaction_id": "i1", "image": None, "image_url": "",
                         "domain": "food"}], ["food"], nested_lists=False)
    assert join_keys(split[0]) == ["s1", "i1"]
    assert join_keys({"session_id": "s1", "turns": {"interaction_id": ["s1"]}}) == ["s1"]
    assert join_keys({"turns": []}) == []


def test_images_are_bounded_to_960_by_1280_either_way_and_never_enlarged():
    assert bound_image(_img(2000, 1500)).size == (1280, 960)
    assert bound_image(_img(1500, 2000)).size == (960, 1280)
    assert bound_image(_img(3024, 4032)).size == (960, 1280)  # the glasses' 3:4 photographs, exactly
    assert bound_image(_img(3000, 1000)).size == (1280, 427)
    assert bound_image(_img(500, 400)).size == (500, 400)
    assert bound_image(Image.new("L", (10, 10))).mode == "RGB"
    assert bound_image(_img(3024, 4032), None).size == (3024, 4032)
    assert bound_image(_img(3024, 4032), (480, 640)).size == (480, 640)


def test_parse_bound():
    assert parse_bound("960x1280") == (960, 1280) and parse_bound("1280X960") == (960, 1280)
    assert parse_bound("none") is None
    for bad in ("960", "0x10", "axb"):
        with pytest.raises(ValueError):
            parse_bound(bad)


def test_image_names_are_safe_file_names():
    assert image_name(BASIL) == f"images/{BASIL}.jpg"
    odd = image_name("../x y")
    assert odd.startswith("images/") and "/" not in odd[len("images/"):] and " " not in odd
    assert image_name("../x y") != image_name("../x_y")


def test_a_missing_split_is_reported_and_the_others_load():
    def load(name):
        if name == "public_test":
            raise ValueError('Unknown split "public_test". Should be one of [\'validation\'].')
        return [name]

    splits, missing = load_splits(load, ["validation", "public_test"])
    assert splits == {"validation": ["validation"]}
    assert list(missing) == ["public_test"] and "Unknown split" in missing["public_test"]
    with pytest.raises(InputError) as e:
        load_splits(load, ["public_test"])
    assert e.value.problems[0].file == "split public_test"


def test_join_writes_bounded_images_and_domains(tmp_path):
    local = tmp_path / "remote.png"
    _img(400, 300, "blue").save(local)
    validation = crag_split([
        {"session_id": BASIL, "image": _img(2000, 1500), "image_url": "", "domain": "plants"},
        {"session_id": "s-other", "image": _img(10, 10), "image_url": "", "domain": "food"},
    ], ["food", "plants"])
    public_test = crag_split([  # a different label order: names are read per split
        {"session_id": BRIDGE, "image": None, "image_url": local.as_uri(), "domain": "landmarks"},
        {"session_id": OWL, "image": None, "image_url": (tmp_path / "gone.png").as_uri(), "domain": "animals"},
    ], ["animals", "landmarks"], nested_lists=False)
    questions = load_release(write_release(tmp_path / "test.parquet")).questions
    extra = questions[0].model_copy(update={"question_id": "s-unseen"})
    out, report = join(questions + [extra], {"validation": validation, "public_test": public_test},
                       tmp_path / "out", fetch=fetch_url)
    by_id = {q.question_id: q for q in out}
    assert by_id[BASIL].domain == "plants" and by_id[BRIDGE].domain == "landmarks"
    assert by_id[OWL].domain == "animals" and by_id[OWL].image is None
    with Image.open(tmp_path / "out" / by_id[BASIL].image) as im:
        assert im.size == (1280, 960) and im.format == "JPEG"
    with Image.open(tmp_path / "out" / by_id[BRIDGE].image) as im:
        assert im.size == (400, 300)
    assert report["image_from_url"] == [BRIDGE]
    assert [m["question_id"] for m in report["no_image"]] == [OWL]
    assert "URLError" in report["no_image"][0]["error"]
    assert report["no_crag_row"] == ["s-unseen"] and by_id["s-unseen"].domain == "unknown"
    assert report["splits"]["public_test"] == {"domain_names": ["animals", "landmarks"], "domains_as_numbers": False}
    assert report["bound"] == [960, 1280] and report["joined_by_interaction_id"] == []
    assert not (tmp_path / "out" / "images" / "s-other.jpg").exists()  # not a GAMUT question


def test_join_falls_back_to_interaction_id_takes_integer_domains_and_keeps_size(tmp_path):
    split = crag_split([
        {"session_id": "other-session", "interaction_id": BASIL, "image": _img(3024, 4032), "image_url": "",
         "domain": 3},
        {"session_id": BRIDGE, "image": _img(20, 10), "image_url": "", "domain": 5},
    ], None)
    questions = load_release(write_release(tmp_path / "test.parquet")).questions
    out, report = join(questions, {"validation": split}, tmp_path / "out", bound=None)
    by_id = {q.question_id: q for q in out}
    assert by_id[BASIL].domain == "3" and by_id[BRIDGE].domain == "5"
    assert report["joined_by_interaction_id"] == [BASIL] and report["no_crag_row"] == [OWL]
    assert report["splits"]["validation"] == {"domain_names": None, "domains_as_numbers": True}
    assert report["bound"] is None
    with Image.open(tmp_path / "out" / by_id[BASIL].image) as im:
        assert im.size == (3024, 4032)


def test_build_dataset_end_to_end(gamut, tmp_path):
    release = write_release(tmp_path / "release" / "test.parquet", warned=True)
    orphan = {**text_only_rows()[0], "session_id": "s-zzz"}
    text_only = write_parquet(text_only_rows() + [orphan], tmp_path / "release" / "test_text_only.parquet")
    splits = {"validation": crag_split([
        {"session_id": BASIL, "image": _img(1600, 2400), "image_url": "", "domain": "plants"},
        {"session_id": BRIDGE, "image": _img(300, 200), "image_url": "", "domain": "landmarks"},
        {"session_id": OWL, "image": _img(640, 480), "image_url": "", "domain": "animals"},
    ], ["animals", "landmarks", "plants"])}
    out_path = tmp_path / "gamut" / "gamut.jsonl"
    report = build_dataset(release, text_only, splits, out_path)
    assert report["questions"] == 4 and report["with_image"] == 3 and report["with_text_only"] == 2
    assert report["with_own_text_only_checks"] == 1 and report["text_only_rubric_differs"] == [BRIDGE]
    assert report["text_only_without_main_question"] == ["s-zzz"]
    assert sorted(report["no_text_only_form"]) == sorted([OWL, report["no_crag_row"][0]])
    assert len(report["warnings"]) == 3 and "snippet 2 has no text" in report["warnings"][0]
    assert report["domains"] == {"animals": 1, "landmarks": 1, "plants": 1, "unknown": 1} and report["checks"] == 9
    qs = {q.question_id: q for q in load_questions(out_path)}  # images checked too
    assert qs[BASIL].question_text_only == "What is sweet basil used for?"
    assert qs[OWL].question_text_only is None
    assert qs[BASIL].image == f"images/{BASIL}.jpg"
    with Image.open(out_path.parent / qs[BASIL].image) as im:
        assert im.size == (853, 1280)
    assert [c.check_id for c in qs[BASIL].checks] == ["answer_critical.1", "valuable.1", "valuable.2", "context.1"]
    assert [s.id for s in qs[BASIL].snippets] == ["1", "2"] and qs[BASIL].checks[1].evidence == ["2"]
    assert [c.text for c in qs[BRIDGE].checks_text_only][1] == "The response says the bridge is in San Francisco."
    line = json.loads(out_path.read_text().splitlines()[0])
    assert "null" not in json.dumps(line)  # optional fields are left out, not written as null
    res = gamut("validate", out_path)
    assert res.exit_code == 0 and "4 questions, all valid" in res.output
    with pytest.raises(InputError):
        build_dataset(release, text_only, splits, tmp_path / "strict" / "gamut.jsonl", strict=True)


def test_fetch_script_without_network_fails_cleanly(tmp_path):
    import os
    import sys

    script = PROJECT_ROOT / "scripts" / "fetch_data.py"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    # 300 s: the hub client gives up offline after its own retries.
    res = processes.run([sys.executable, str(script), "--out", str(tmp_path / "out")], env=env, timeout=300,
                        waiting_for="fetch_data.py to fail offline")
    assert res.returncode == 1
    assert "error: could not fetch the data" in res.stderr and "Traceback" not in res.stderr
    assert res.stdout == ""
    res = processes.run([sys.executable, str(script), "--image-bound", "big"], timeout=60,  # argparse only
                        waiting_for="fetch_data.py's usage error")
    assert res.returncode == 2 and "expected WIDTHxHEIGHT" in res.stderr
