"""`gamut-local validate` on a corpus of bad files: one line per problem, exit 1, no traceback."""

import json

import pytest

GOOD = {"question_id": "q1", "domain": "food", "question": "What is this drink?",
        "question_text_only": "What is a cappuccino?", "image": None,
        "meta_rubric": {"snippets": [{"id": "s1", "title": "Cappuccino", "text": "Italian coffee drink."}],
                        "items": [{"id": "origin", "type": "simple", "tier": "answer_critical",
                                   "fact": "It is Italian.", "evidence": ["s1"]}]}}


def with_(**changes):
    return json.dumps({**GOOD, **changes})


def item(**changes):
    return with_(meta_rubric={**GOOD["meta_rubric"], "items": [{**GOOD["meta_rubric"]["items"][0], **changes}]})


CASES = {
    "not_json": (b'{"question_id": "q1",\n', ["1: <record>: not valid JSON"]),
    "not_utf8": (with_().encode() + b"\n\xff\xfe{}\n", ["2: <record>: not valid UTF-8"]),
    "not_object": (b"[1, 2]\n", ["1: <record>: expected a JSON object, got list"]),
    "empty": (b"", ["<record>: file is empty"]),
    "wrong_type": (with_(domain=7).encode(), ["1: domain: Input should be a valid string"]),
    "missing_field": (json.dumps({k: v for k, v in GOOD.items() if k != "question"}).encode(),
                      ["1: question: Field required"]),
    "unknown_item_type": (item(type="opinion").encode(), ["1: meta_rubric.items.0: Input tag 'opinion'"]),
    "unknown_field": (item(colour="red").encode(), ["1: meta_rubric.items.0.simple.colour: Extra inputs"]),
    "bad_tier": (item(tier="vital").encode(), ["1: meta_rubric.items.0.simple.tier: Input should be"]),
    "unknown_snippet": (item(evidence=["s9"]).encode(), ["1: meta_rubric: Value error, item 'origin' cites unknown snippet ids: s9"]),
    "no_rubric": (with_(meta_rubric=None).encode(), ["1: <record>: Value error, a question needs a meta_rubric"]),
    "duplicate_id": ((with_() + "\n" + with_()).encode(), ["2: question_id: duplicate id 'q1' (first at {path}:1)"]),
    "missing_image": (with_(image="nope.png").encode(), ["1: image: image file not found"]),
    "missing_package": (with_(image="pkg:no_such_pkg/x.png").encode(), ["1: image: package 'no_such_pkg' is not installed"]),
    "several": ((with_(domain=1) + "\n\n" + "{bad\n").encode(), ["1: domain:", "3: <record>: not valid JSON"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_file_reported_with_line_and_exit_1(gamut, tmp_path, name):
    content, expected = CASES[name]
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(content)
    res = gamut("validate", path)
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    for line in (e.format(path=path) for e in expected):
        assert f"{path}:{line}" in res.output or f"{path}: {line}" in res.output, res.output


def test_broken_image_file(gamut, tmp_path):
    (tmp_path / "broken.png").write_bytes(b"not a png")
    path = tmp_path / "d.jsonl"
    path.write_text(with_(image="broken.png"))
    res = gamut("validate", path)
    assert res.exit_code == 1 and f"{path}:1: image: image cannot be opened" in res.output


def test_missing_file(gamut, tmp_path):
    res = gamut("validate", tmp_path / "absent.jsonl")
    assert res.exit_code == 1 and "absent.jsonl: <record>: file not found" in res.output


def test_good_file_with_relative_and_package_images(gamut, tmp_path):
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "img.png")
    path = tmp_path / "d.jsonl"
    path.write_text(with_(image="img.png") + "\n" + with_(question_id="q2", image="pkg:skimage/data/coffee.png"))
    res = gamut("validate", path)
    assert res.exit_code == 0, res.output
    assert "2 questions, all valid" in res.output


def test_compile_validates_first_and_writes_nothing_on_error(gamut, tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(item(type="opinion"))
    out = tmp_path / "rubric.jsonl"
    res = gamut("compile", path, "--out", out)
    assert res.exit_code == 1 and not out.exists()
