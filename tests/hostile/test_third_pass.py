"""Issue 24, third round: what making the authoring commands fast at 100,000 items could
break, held to the old behaviour: export's bytes and its durability, the strict YAML loader's
fast paths (mappings without merge keys, documents without anchors), compiled checks as
plain dicts, and the two verdict readers on lone surrogates."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from gamut_local.errors import InputError

# Strings YAML treats specially: ones that resolve to other types, indicators, line breaks,
# long ones the emitter folds, non-ASCII and control characters.
ODD_TEXTS = ["yes", "123", "null", "- x", "# not a comment", "a: b", "trailing ", " leading", "multi\nline",
             "tab\there", "ünï “q” 日本語", "x" * 250, " ".join(["word"] * 60), "'s'", '"d"', "~", "@at", "`t",
             "{b}", "[l]", "0x1F", "1e3", "2020-01-01", "true", "NO", "on", "end\n", "\\b", "%p", "&a", "*a", "!t",
             "|p", ">g", "😀", "\u2028", "bell\x07", "R&D", ""]


def _odd_record(k: int) -> dict:
    pick = lambda j: ODD_TEXTS[(k * 7 + j) % len(ODD_TEXTS)] or "x"  # noqa: E731
    items = [{"id": f"a{k}", "type": "simple", "tier": "answer_critical", "fact": pick(0), "subject": pick(1),
              "evidence": ["s1"]},
             {"id": f"b{k}", "type": "strict_list", "tier": "valuable", "elements": [pick(2), pick(3)],
              "meta_insight": pick(4)},
             {"id": f"c{k}", "type": "flexible_list", "tier": "context", "options": [pick(5 + j) for j in range(8)],
              "min_required": 2, "extra_thresholds": [3, 8]},
             {"id": f"d{k}", "type": "process", "tier": "valuable", "check_full_order": True,
              "steps": [{"text": pick(13)}, {"text": pick(14), "required": False}]},
             {"id": f"e{k}", "type": "relationship", "tier": "answer_critical", "entities": [pick(15), pick(16)],
              "aspects": [pick(17)]}]
    return {"question_id": f"q{k}", "domain": pick(18), "question": pick(19), "question_text_only": pick(20),
            "meta_rubric": {"items": items, "snippets": [{"id": "s1", "title": pick(21), "url": None,
                                                          "text": pick(22)}]},
            "provenance": {"revised_on": "2026-01-01", "revised_by": pick(23)}}


def test_odd_texts_export_and_import_to_the_same_bytes(tmp_path):
    from gamut_local.stages.revise import export_dataset, import_dir

    src = tmp_path / "odd.jsonl"
    src.write_text("".join(json.dumps(_odd_record(k), ensure_ascii=False, sort_keys=True,
                                      separators=(",", ":")) + "\n" for k in range(len(ODD_TEXTS))))
    export_dataset(src, tmp_path / "yaml")
    import_dir(tmp_path / "yaml", tmp_path / "back.jsonl")
    assert (tmp_path / "back.jsonl").read_bytes() == src.read_bytes()


@pytest.mark.parametrize("folder_exists", [False, True])
def test_an_export_is_on_disk_when_it_says_so(tmp_path, monkeypatch, folder_exists):
    """Every file's bytes are on disk (one sync) before the first rename (a crash leaves them
    whole or absent) and the folder is fsynced after the last rename (so the names last too).
    A new folder is written whole under another name and renamed once; into an existing one,
    each file is renamed from the temporary folder."""
    from gamut_local.stages import revise

    events = []
    real_fsync, real_replace, real_sync = os.fsync, os.replace, os.sync
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(a), str(b))), real_replace(a, b))[1])
    monkeypatch.setattr(os, "sync", lambda: (events.append(("sync",)), real_sync())[1])
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(_odd_record(k)) + "\n" for k in range(5)))
    folder = tmp_path / "yaml"
    if folder_exists:
        folder.mkdir()
    paths = revise.export_dataset(src, folder)
    assert len(paths) == 5 and sorted(folder.iterdir()) == paths
    kinds = [e[0] for e in events]
    renames = [i for i, k in enumerate(kinds) if k == "replace"]
    assert kinds.count("sync") == 1 and kinds.index("sync") < renames[0]
    assert len(renames) == (5 if folder_exists else 1)
    after = [e[1] for e in events[renames[-1]:] if e[0] == "fsync"]
    assert str(folder) in after and str(tmp_path) in after  # the names in the folder, the folder in its parent


@pytest.mark.parametrize("folder_exists", [False, True])
def test_an_export_that_fails_half_way_leaves_nothing(tmp_path, monkeypatch, folder_exists):
    """Into a new folder (written whole beside it, then renamed) nothing is left, neither the
    folder nor its temporary; into an existing one, no file (one temporary file each)."""
    from gamut_local.stages import revise

    real = revise.export_text

    def fail_on_the_third(rec, q, source):
        if rec["question_id"] == "q2":
            raise OSError(28, "No space left on device")
        return real(rec, q, source)

    monkeypatch.setattr(revise, "export_text", fail_on_the_third)
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(_odd_record(k)) + "\n" for k in range(5)))
    if folder_exists:
        (tmp_path / "yaml").mkdir()
    with pytest.raises(OSError):
        revise.export_dataset(src, tmp_path / "yaml")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["d.jsonl", "yaml"] if folder_exists else ["d.jsonl"])
    assert not folder_exists or list((tmp_path / "yaml").iterdir()) == []


# -- the strict YAML loader's fast paths ----------------------------------------------------

BOMB_ROWS = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdef", "bcdefg"))


@pytest.mark.parametrize("text, refused", [
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + BOMB_ROWS, True),  # block mapping
    ("a:\t&a [x, x, x, x, x, x, x, x, x, x]\n" + BOMB_ROWS, True),  # after a tab
    ("{a: &a [x, x, x, x, x, x, x, x, x, x], " + ", ".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]" for p, c in zip("abcdef", "bcdefg")) + "}", True),  # flow
    ('{"a":&a [x, x, x, x, x, x, x, x, x, x], ' + ", ".join(
        f'"{c}":&{c} [{", ".join([f"*{p}"] * 10)}]' for p, c in zip("abcdef", "bcdefg")) + "}", True),  # "k":&a
    ("a: &a [*a]\n", True),  # a cycle
    ("&a [&b [&c [x, x, x, x, x, x, x, x, x, x]]]\n", False),  # at a line's start and after '['
    ("[&a [x], *a, R&D, &b [*a, *a], *b]\n", False),
])
def test_every_anchor_is_seen_by_the_alias_bound(text, refused):
    """The bound is skipped for a text with no anchor; an anchor may stand after a space, a tab,
    a flow indicator, a JSON key's colon or at a line's start, and each one is found."""
    from gamut_local.config import MAX_YAML_NODES, _MAYBE_ANCHOR, load_yaml_node, load_yaml_text

    assert _MAYBE_ANCHOR.search(text)
    if not refused:
        assert load_yaml_text(text) == yaml.safe_load(text)
        return
    for load in (load_yaml_text, load_yaml_node):
        with pytest.raises(yaml.YAMLError, match=f"through its aliases|a cycle|{MAX_YAML_NODES}"):
            load(text)


@pytest.mark.parametrize("text, line, first", [
    ("a: 1\nb: 2\na: 3\n", 3, 1),
    ("top:\n  x: 1\n  y: 2\n  x: 3\n", 4, 2),
    ("1: x\n1: y\n", 2, 1),
    ("base: &b {x: 1}\nm:\n  <<: *b\n  y: 1\n  y: 2\n", 5, 4),  # a mapping with a merge key: the other path
    ("[{k: 1, k: 2}]", 1, 1),
])
def test_a_key_given_twice_is_refused_on_both_paths(text, line, first):
    from gamut_local.config import load_yaml_node, load_yaml_text

    for load in (load_yaml_text, load_yaml_node):
        with pytest.raises(yaml.constructor.ConstructorError, match=f"appears twice \\(first on line {first}\\)") as e:
            load(text)
        assert e.value.problem_mark.line + 1 == line


def test_the_strict_loader_reads_what_the_safe_loader_reads():
    """Without repeated keys, the one-pass mapping gives the safe loader's values: types,
    key order, merge keys, nested and empty collections."""
    from gamut_local.config import load_yaml_text

    texts = ["a: 1\nb: [1, 2.5, true, null, ~, '3', 2020-01-01]\nc: {d: {e: []}, f: {}}\n",
             "base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n", "- {a: 1}\n- [x, {b: c}]\n", "? [1]\n: 2\n"]
    texts += [yaml.safe_dump(_odd_record(k), allow_unicode=True) for k in range(5)]
    for text in texts:
        try:
            want = yaml.safe_load(text)
        except yaml.YAMLError as e:  # the unhashable key: PyYAML's own message, both ways
            with pytest.raises(yaml.YAMLError, match="unhashable"):
                load_yaml_text(text)
            assert "unhashable" in str(e)
            continue
        got = load_yaml_text(text)
        assert got == want and json.dumps(got, default=str) == json.dumps(want, default=str)


# -- lone surrogates: pyarrow's verdict reader and the record reader agree ------------------

@pytest.mark.parametrize("escape", [r"\ud800", r"\udc80", r"\udfff", r"\ud800\ud800", r"\udc00\ud800",
                                    r"\ud83d\ude00", r"\\ud800"])
@pytest.mark.parametrize("field", ["raw", "question_id", "check_id", "judge", "extra"])
def test_both_verdict_readers_judge_a_surrogate_alike(tmp_path, escape, field):
    from gamut_local.data.verdict_table import read_verdicts
    from tests.reference import read_verdicts_reference

    rows = [{"question_id": f"q{i}", "model": "m", "variant": "text_only", "judge": "j", "check_id": f"c{k}",
             "tier": "valuable", "verdict": "meets", "raw": "x"} for i in range(3) for k in range(3)]
    rows[4][field] = "SPOT"
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows).replace("SPOT", f"a{escape}b"))

    def outcome(read, **kw):
        try:
            table = read([path], **kw)
        except InputError as e:
            return [str(p) for p in e.problems]
        return (table.questions, table.checks, table.judges)

    reference = outcome(read_verdicts_reference)
    lone = escape not in (r"\ud83d\ude00", r"\\ud800")
    assert (reference == ["%s:5: <record>: a string holds a lone surrogate (an escape such as \\ud800 without its "
                          "pair), not text" % path]) == lone
    assert outcome(read_verdicts) == reference


# -- the viewer's read routes: more odd queries ---------------------------------------------

@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    """One run for every read (reads write nothing)."""
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    from gamut_local.testing.sample_run import build_sample_run
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    root = tmp_path_factory.mktemp("viewer")
    run = build_sample_run(root / "run", seed=0)
    yield TestClient(create_app(open_run(run), annotator="ann"), base_url="http://127.0.0.1:8765")


ODD_READS = [
    "/api/queue?pos=1&pos=x", "/api/queue?pos=%2B3", "/api/queue?pos=%203%20", "/api/queue?pos=3.0",
    "/api/queue?pos=0x10", "/api/queue?pos=1_000", "/api/queue?only=all&pos=999999", "/api/queue?blind=%ff",
    "/api/queue?q=" + "x" * 20000, "/api/queue?q=&pos=0", "/api/queue?only=all&q=%00",
    "/api/questions?offset=-1", "/api/questions?offset=%EF%BC%91", "/api/questions?sort=&offset=1",
    "/api/questions?sort=" + "%ff" * 3000, "/api/questions?model=%00&variant=%00&domain=%00",
    "/api/questions?variant=text_only&variant=multimodal", "/api/questions?disagree=%ED%A0%80",
    "/api/questions?offset=" + "1" * 4301, "/questions?offset=" + "1" * 4301 + "&sort=%3Cscript%3Ealert(1)",
    "/api/question/%2F", "/api/question/..%2F..%2Fetc%2Fpasswd", "/question/%3Cscript%3E",
    "/image/%00", "/image/" + "%ff" * 300, "/figure/..%2Fmanifest.json", "/figure/", "/static/..%2Fapp.py",
    "/static/" + "a" * 5000, "/api/overview?x=" + "%ED%A0%80" * 100,
]


@pytest.mark.parametrize("url", ODD_READS)
def test_more_odd_reads_never_give_a_500(viewer, url):
    res = viewer.get(url)
    assert res.status_code in (200, 404), (url, res.status_code, res.text[:200])
    assert "<script>alert" not in res.text  # a value from the query is escaped wherever a page shows it


def test_a_query_value_is_escaped_in_the_page(viewer):
    res = viewer.get("/questions", params={"sort": "<script>alert(1)</script>", "model": '"><b>x'})
    assert res.status_code == 200
    assert "<script>alert(1)" not in res.text and '"><b>x' not in res.text


def test_the_gc_comes_back_on_after_a_bulk_read_good_or_bad(tmp_path):
    import gc

    from gamut_local.config import load_yaml_text
    from gamut_local.data.dataset import load_questions

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question_id": "q1"}\n')
    for read in (lambda: load_yaml_text("a: 1\na: 2\n"), lambda: load_questions(bad, check_images=False)):
        with pytest.raises((yaml.YAMLError, InputError)):
            read()
        assert gc.isenabled()
    gc.disable()
    try:  # and a caller's choice to run without it stands
        load_yaml_text("a: 1\n")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_audit_requests_keep_snippet_order_without_a_search_per_pair():
    """Snippet-major within a question, in the order the snippets are listed, each snippet's
    items in item order: as before the position lookup became a dict."""
    from gamut_local.data.records import Question
    from gamut_local.stages.audit import audit_requests

    class Spec:
        max_snippet_chars = 100

        class model:
            system_prompt = None

    n = 50
    q = Question.model_validate({"question_id": "q", "domain": "d", "question": "Q?", "meta_rubric": {
        "items": [{"id": f"i{k}", "type": "simple", "tier": "valuable", "fact": f"f{k}",
                   "evidence": [f"s{(k * 7) % n}", f"s{(k * 3 + 1) % n}"]} for k in range(n)],
        "snippets": [{"id": f"s{k}", "title": "T", "text": "x"} for k in reversed(range(n))]}})
    keys = [r["key"] for r in audit_requests([q], Spec)]
    snippet_order = [f"s{k}" for k in reversed(range(n))]
    want = sorted(((sid, item) for item in range(n) for sid in (f"s{(item * 7) % n}", f"s{(item * 3 + 1) % n}")),
                  key=lambda p: snippet_order.index(p[0]))
    assert keys == [("q", f"i{item}", sid) for sid, item in want]
