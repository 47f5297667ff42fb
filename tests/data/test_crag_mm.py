"""CRAG-MM join on real `datasets.Dataset` objects built in the public CRAG-MM shape."""

from __future__ import annotations

import json

import pytest

datasets = pytest.importorskip("datasets")
pytest.importorskip("pyarrow")

from PIL import Image  # noqa: E402

from gamut_local.config import PROJECT_ROOT
from gamut_local.data.crag_mm import (  # noqa: E402
    bound_image,
    build_dataset,
    domain_names,
    fetch_url,
    first_domain,
    image_name,
    join,
)
from gamut_local.data.dataset import load_questions  # noqa: E402
from gamut_local.data.gamut_release import load_release  # noqa: E402
from gamut_local.testing.release import release_rows, write_parquet, write_release  # noqa: E402


def crag_split(rows: list[dict], names: list[str], *, nested_lists: bool = True):
    """A split like crag-mm-single-turn-public: turns as a dict of lists (Sequence of a dict)
    or, with nested_lists=False, as a list of dicts (datasets' newer List of a dict)."""
    turn = {"interaction_id": datasets.Value("string"), "domain": datasets.ClassLabel(names=names),
            "query": datasets.Value("string")}
    turns = datasets.Sequence(turn) if nested_lists else datasets.List(turn)
    features = datasets.Features({"session_id": datasets.Value("string"), "image": datasets.Image(),
                                  "image_url": datasets.Value("string"), "turns": turns})
    data = {k: [r[k] for r in rows] for k in ("session_id", "image", "image_url")}
    if nested_lists:
        data["turns"] = [{"interaction_id": [r["session_id"] + "-0"], "domain": [names.index(r["domain"])],
                          "query": ["q"]} for r in rows]
    else:
        data["turns"] = [[{"interaction_id": r["session_id"] + "-0", "domain": names.index(r["domain"]),
                           "query": "q"}] for r in rows]
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


def test_images_are_bounded_to_960_by_1280_either_way_and_never_enlarged():
    assert bound_image(_img(2000, 1500)).size == (1280, 960)
    assert bound_image(_img(1500, 2000)).size == (960, 1280)
    assert bound_image(_img(3000, 1000)).size == (1280, 427)
    assert bound_image(_img(500, 400)).size == (500, 400)
    assert bound_image(Image.new("L", (10, 10))).mode == "RGB"


def test_image_names_are_safe_file_names():
    assert image_name("s-basil") == "images/s-basil.jpg"
    odd = image_name("../x y")
    assert odd.startswith("images/") and "/" not in odd[len("images/"):] and " " not in odd
    assert image_name("../x y") != image_name("../x_y")


def test_join_writes_bounded_images_and_domains(tmp_path):
    local = tmp_path / "remote.png"
    _img(400, 300, "blue").save(local)
    validation = crag_split([
        {"session_id": "s-basil", "image": _img(2000, 1500), "image_url": "", "domain": "plants"},
        {"session_id": "s-other", "image": _img(10, 10), "image_url": "", "domain": "food"},
    ], ["food", "plants"])
    public_test = crag_split([  # a different label order: names are read per split
        {"session_id": "s-bridge", "image": None, "image_url": local.as_uri(), "domain": "landmarks"},
        {"session_id": "s-owl", "image": None, "image_url": (tmp_path / "gone.png").as_uri(), "domain": "animals"},
    ], ["animals", "landmarks"], nested_lists=False)
    questions = load_release(write_release(tmp_path / "test.parquet"))
    extra = questions[0].model_copy(update={"question_id": "s-unseen"})
    out, report = join(questions + [extra], {"validation": validation, "public_test": public_test},
                       tmp_path / "out", fetch=fetch_url)
    by_id = {q.question_id: q for q in out}
    assert by_id["s-basil"].domain == "plants" and by_id["s-bridge"].domain == "landmarks"
    assert by_id["s-owl"].domain == "animals" and by_id["s-owl"].image is None
    with Image.open(tmp_path / "out" / by_id["s-basil"].image) as im:
        assert im.size == (1280, 960) and im.format == "JPEG"
    with Image.open(tmp_path / "out" / by_id["s-bridge"].image) as im:
        assert im.size == (400, 300)
    assert report["image_from_url"] == ["s-bridge"]
    assert [m["question_id"] for m in report["no_image"]] == ["s-owl"]
    assert "URLError" in report["no_image"][0]["error"]
    assert report["no_crag_row"] == ["s-unseen"] and by_id["s-unseen"].domain == "unknown"
    assert report["splits"]["public_test"]["domain_names"] == ["animals", "landmarks"]
    assert not (tmp_path / "out" / "images" / "s-other.jpg").exists()  # not a GAMUT question


def test_build_dataset_end_to_end(gamut, tmp_path):
    release = write_release(tmp_path / "release" / "test.parquet")
    text_rows = [{**r, "question": q} for r, q in zip(release_rows()[:2], (
        "What is basil used for?", "When was the Golden Gate Bridge built?"))]
    orphan = {**release_rows()[2], "session_id": "s-zzz"}
    text_only = write_parquet(text_rows + [orphan], tmp_path / "release" / "test_text_only.parquet")
    splits = {"validation": crag_split([
        {"session_id": "s-basil", "image": _img(1600, 2400), "image_url": "", "domain": "plants"},
        {"session_id": "s-bridge", "image": _img(300, 200), "image_url": "", "domain": "landmarks"},
        {"session_id": "s-owl", "image": _img(640, 480), "image_url": "", "domain": "animals"},
    ], ["animals", "landmarks", "plants"])}
    out_path = tmp_path / "gamut" / "gamut.jsonl"
    report = build_dataset(release, text_only, splits, out_path)
    assert report["questions"] == 3 and report["with_image"] == 3 and report["with_text_only"] == 2
    assert report["text_only_without_main_question"] == ["s-zzz"]
    assert report["text_only_rubric_differs"] == []
    assert report["domains"] == {"animals": 1, "landmarks": 1, "plants": 1} and report["checks"] == 7
    qs = {q.question_id: q for q in load_questions(out_path)}  # images checked too
    assert qs["s-basil"].question_text_only == "What is basil used for?"
    assert qs["s-owl"].question_text_only is None
    assert qs["s-basil"].image == "images/s-basil.jpg"
    with Image.open(out_path.parent / qs["s-basil"].image) as im:
        assert im.size == (853, 1280)
    assert [c.check_id for c in qs["s-basil"].checks] == ["answer_critical.1", "valuable.1", "valuable.2", "context.1"]
    line = json.loads(out_path.read_text().splitlines()[0])
    assert "null" not in json.dumps(line)  # optional fields are left out, not written as null
    res = gamut("validate", out_path)
    assert res.exit_code == 0 and "3 questions" in res.output


def test_fetch_script_without_network_fails_cleanly(tmp_path):
    import os
    import subprocess
    import sys

    script = PROJECT_ROOT / "scripts" / "fetch_data.py"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    res = subprocess.run([sys.executable, str(script), "--out", str(tmp_path / "out")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    assert "error: could not fetch the data" in res.stderr and "Traceback" not in res.stderr
    assert res.stdout == ""


def test_a_text_only_rubric_that_differs_is_reported(tmp_path):
    from gamut_local.data.crag_mm import merge_text_only

    main = load_release(write_release(tmp_path / "test.parquet"))
    rows = release_rows()
    rows[1]["rubrics"]["Valuable"][0]["Ingredient"] = "The response names the bridge in San Francisco."
    other = load_release(write_parquet(rows, tmp_path / "text_only.parquet"))
    merged, mismatch = merge_text_only(main, other)
    assert mismatch == {"text_only_without_main_question": [], "text_only_rubric_differs": ["s-bridge"]}
    # The main split's checks are kept for both variants.
    assert merged[1].checks == main[1].checks
