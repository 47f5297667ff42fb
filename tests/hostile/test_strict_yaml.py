"""The strict YAML loader (configs, exported rubrics): every anchor seen by the alias bound,
a key given twice refused on both parse paths with its line, the safe loader's values
otherwise, a large document without aliases read, and the garbage collector left as the
caller had it."""

from __future__ import annotations

import json

import pytest
import yaml

from gamut_local.errors import InputError
from tests.hostile.odd_texts import odd_record


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
    from gamut_local.strict_yaml import MAX_YAML_NODES, _MAYBE_ANCHOR, load_yaml_node, load_yaml_text

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
    from gamut_local.strict_yaml import load_yaml_node, load_yaml_text

    for load in (load_yaml_text, load_yaml_node):
        with pytest.raises(yaml.constructor.ConstructorError, match=f"appears twice \\(first on line {first}\\)") as e:
            load(text)
        assert e.value.problem_mark.line + 1 == line


def test_the_strict_loader_reads_what_the_safe_loader_reads():
    """Without repeated keys, the one-pass mapping gives the safe loader's values: types,
    key order, merge keys, nested and empty collections."""
    from gamut_local.strict_yaml import load_yaml_text

    texts = ["a: 1\nb: [1, 2.5, true, null, ~, '3', 2020-01-01]\nc: {d: {e: []}, f: {}}\n",
             "base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n", "- {a: 1}\n- [x, {b: c}]\n", "? [1]\n: 2\n"]
    texts += [yaml.safe_dump(odd_record(k), allow_unicode=True) for k in range(5)]
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


def test_the_gc_comes_back_on_after_a_bulk_read_good_or_bad(tmp_path):
    import gc

    from gamut_local.strict_yaml import load_yaml_text
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


def test_a_large_yaml_without_aliases_is_not_taken_for_an_alias_bomb():
    """The alias bound counts what aliases add, not the document's size: an exported rubric of
    tens of thousands of items reads back; a bomb of the same size is refused."""
    import yaml

    from gamut_local.strict_yaml import MAX_YAML_NODES, load_yaml_node

    n = MAX_YAML_NODES // 4  # five nodes each: more nodes than the bound, and no alias
    big = "items:\n" + "".join(f"- {{id: i{k}, fact: f{k}}}\n" for k in range(n))
    assert len(load_yaml_node(big)[1]["items"]) == n
    bomb = "a: &a [" + ", ".join(["x"] * 10) + "]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcd", "bcde"))
    with pytest.raises(yaml.YAMLError, match="through its aliases"):
        load_yaml_node(bomb)
