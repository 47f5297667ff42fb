"""Human revision: one editable YAML per question, read back with precise errors, and diffs.

`export_text` writes a question record as YAML with comments: a header that says how to
read it back (and the hash of the record as exported), and under each meta-rubric item the
checks it compiles to now. `import_text` parses it back to the record dict; nothing is
normalised on the way, so a file nobody edited reads back to the same record, and written
with the same JSON Lines writer, to the same bytes. `diff_records` compares two versions
per question: items and checks added, removed, re-tiered and reworded.

Plain functions of dicts and rubric objects: this module knows nothing of files or records.
"""

from __future__ import annotations

import json
import re

import yaml

from gamut_local.errors import Problem
from gamut_local.hashing import short_hash
from gamut_local.rubric.compiler import checks_for, compile_item
from gamut_local.strict_yaml import load_yaml_node

HASH_LINE = re.compile(r"^# source-hash: ([0-9a-f]{12})$", re.MULTILINE)
ITEM_KEY_ORDER = ("id", "type", "tier", "subject")
RECORD_KEY_ORDER = ("question_id", "domain", "question", "question_text_only", "image")
WIDTH = 100  # where long texts fold
_BASE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's emitter where built


class _Dumper(_BASE_DUMPER):
    """The safe dumper, never writing an anchor: a record's values are plain data, and an
    editor should see each one written out where it is."""

    def ignore_aliases(self, data) -> bool:
        return True


def record_hash(record: dict) -> str:
    """The hash an export's header names: of the record as JSON Lines writes it."""
    return text_hash(json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


def text_hash(line: str) -> str:
    """`record_hash` of a record already dumped as JSON Lines writes it."""
    return short_hash(line)


def _dump(value, indent: int) -> str:
    text = yaml.dump(value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=WIDTH,
                     default_flow_style=False)
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True))


def _ordered(d: dict, first: tuple[str, ...], last: tuple[str, ...] = ()) -> dict:
    """Keys in reading order; JSON Lines records are written with sorted keys, so order is
    presentation only and never changes what is read back."""
    head = {k: d[k] for k in first if k in d}
    tail = {k: d[k] for k in last if k in d and k not in head}
    return {**head, **{k: v for k, v in d.items() if k not in head and k not in tail}, **tail}


def _readable(item: dict) -> dict:
    item = _ordered(item, ITEM_KEY_ORDER, ("evidence",))
    if isinstance(item.get("steps"), list):
        item["steps"] = [_ordered(s, ("text",)) if isinstance(s, dict) else s for s in item["steps"]]
    return item


# What may not stand in a comment line: a line break (YAML's include U+0085, U+2028 and
# U+2029: the rest of the text would be read as YAML) or a character YAML refuses anywhere.
_NOT_IN_COMMENT = re.compile("[^\t\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _comment(text: str) -> str:
    """`text` fit for a comment line: those characters as Python writes them escaped ("\\n")."""
    if text.isascii() and text.isprintable():  # nothing to escape (most lines): skip the regex
        return text
    return _NOT_IN_COMMENT.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _compiled_comments(item_obj, indent: int) -> str:
    pad = " " * indent
    lines = [f"{pad}# compiles to:"]
    for c in compile_item(item_obj):
        lines.append(_comment(f"{pad}#   {c.check_id} [{c.tier}]: {c.text}"))
    return "\n".join(lines) + "\n"


def _meta_rubric_text(meta: dict, meta_obj) -> str:
    """The meta-rubric as export writes it, each item followed by the checks it compiles to."""
    out = "meta_rubric:\n  items:\n"
    for item, obj in zip(meta["items"], meta_obj.items):
        out += _dump([_readable(item)], 2) + _compiled_comments(obj, 4)
    rest = {k: v for k, v in meta.items() if k != "items"}
    if isinstance(rest.get("snippets"), list):
        rest["snippets"] = [_ordered(s, ("id", "title", "url"), ("text",)) if isinstance(s, dict) else s
                            for s in rest["snippets"]]
    return out + (_dump(rest, 2) if rest else "")


def export_text(record: dict, question, source: str) -> str:
    """One question as commented YAML. `question` is the validated record (for compiling)."""
    header = (_comment(f"# {record['question_id']}: exported by `gamut-local export` from {source}.") + "\n"
              "# Edit it, then `gamut-local import DIR --out REVISED.jsonl` validates and reads it back.\n"
              "# Comment lines are not read: the checks under each item show what it compiled to.\n"
              f"# source-hash: {record_hash(record)}\n")
    body, keys = "", {}  # the keys around meta_rubric, each run of them in one call to the emitter
    for key, value in _ordered(record, RECORD_KEY_ORDER, ("provenance",)).items():
        if key == "meta_rubric" and value is not None:
            body += (_dump(keys, 0) if keys else "") + _meta_rubric_text(value, question.meta_rubric)
            keys = {}
        else:
            keys[key] = value
    body += _dump(keys, 0) if keys else ""
    if record.get("meta_rubric") is None and question.checks:
        body += "# judged as given: these checks are the rubric.\n"
    return header + body


def line_of(node, loc: tuple) -> int | None:
    """The 1-based line of the YAML node at a pydantic error location (deepest one found)."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        nxt = None
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            nxt = node.value[part]
        if nxt is None:  # a union's tag in the path ("flexible_list"), not a key: skip it
            continue
        node, line = nxt, nxt.start_mark.line + 1
    return line


def import_text(text: str, file: str) -> tuple[dict | None, str | None, object, list[Problem]]:
    """(record dict, the source hash its header names, the YAML node tree (to point at the
    line of a field), problems)."""
    try:
        node, data = load_yaml_node(text)  # the configs' loader: a key given twice is an error
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        return None, None, None, [Problem(file, mark.line + 1 if mark else None, "", f"not valid YAML: {e}")]
    except RecursionError:
        return None, None, None, [Problem(file, None, "", "not valid YAML: nested too deeply")]
    if not isinstance(data, dict):
        return None, None, None, [Problem(file, None, "", "expected a YAML mapping (one question record)")]
    m = HASH_LINE.search(text)
    return data, m.group(1) if m else None, node, []


def _items(q, raw: dict | None) -> dict:
    """item id -> (tier, item, the item as read, where `raw`, the record as read, is given)."""
    items = q.meta_rubric.items if q and q.meta_rubric else []
    read = ((raw or {}).get("meta_rubric") or {}).get("items") or []
    read = read if len(read) == len(items) else [None] * len(items)
    return {i.id: (i.tier, i, r) for i, r in zip(items, read)}


def _content(item) -> dict:
    """An item's fields but its tier, as they are, compared as values (a `model_dump` per
    item took longer than the rest of `diff`)."""
    return {k: v for k, v in item.__dict__.items() if k != "tier"}


def _item_changes(a: dict, b: dict) -> tuple[dict, set]:
    """`_changes` of two `_items`, and the ids of the items that differ. Two items read from
    equal records are equal (validation makes the same item of the same record): only the
    others are compared field by field, in Python, and at 100,000 items that took half of
    `diff`'s comparing."""
    same = {k for k in a if k in b and a[k][2] is not None and a[k][2] == b[k][2]}
    changes = _changes(*({k: (tier, _content(item)) for k, (tier, item, _) in side.items() if k not in same}
                         for side in (a, b)))
    return changes, {*changes["added"], *changes["removed"], *(k for k, _, _ in changes["retiered"]),
                     *changes["reworded"]}


def _checks(q, only: set | None = None) -> dict:
    """check id -> (tier, text); with `only`, the compiled checks of those items alone."""
    if q is None:
        return {}
    if only is None:
        return {c.check_id: (c.tier, c.text) for c in checks_for(q)}
    return {c.check_id: (c.tier, c.text)
            for item in q.meta_rubric.items if item.id in only for c in compile_item(item)}


def _changes(a: dict, b: dict) -> dict:
    """`a`, `b`: id -> (tier, content)."""
    both = [k for k in a if k in b]
    return {"added": [k for k in b if k not in a], "removed": [k for k in a if k not in b],
            "retiered": [(k, a[k][0], b[k][0]) for k in both if a[k][0] != b[k][0]],
            "reworded": [k for k in both if a[k][1] != b[k][1]]}


def _compiled(q) -> bool:
    return q is not None and not q.checks and q.meta_rubric is not None


def diff_records(a: dict, b: dict, read_a: dict | None = None, read_b: dict | None = None) -> dict:
    """question_id -> what changed from A to B (questions only in one side are marked).
    `read_a`, `read_b`: question_id -> the record as read, where known (`diff_question`)."""
    read_a, read_b = read_a or {}, read_b or {}
    out = {qid: diff_question(a.get(qid), b.get(qid), read_a.get(qid), read_b.get(qid)) for qid in diff_order(a, b)}
    return {qid: entry for qid, entry in out.items() if entry is not None}


def diff_order(a: dict, b: dict) -> list:
    """The question ids a diff reports on, in its order: A's, then those only in B."""
    return list(a) + [q for q in b if q not in a]


def diff_question(qa, qb, ra: dict | None = None, rb: dict | None = None) -> dict | None:
    """What changed in one question from `qa` to `qb` (either may be None), or None for
    nothing. `ra`, `rb`: the records as read, where known: records read equal are validated
    to equal questions, so they are not compared again.

    An item's checks depend on that item alone (`compiler.compile_item`) and carry its id, so
    where both sides compile their meta-rubric only the changed items' checks can differ: only
    those are compiled (at 100,000 items, compiling both sides whole was a third of `diff`)."""
    # equal records compile to equal checks; records read unequal are compared item by item
    # (questions equal all the same, say with a default written out, report no change)
    if (ra == rb) if ra is not None and rb is not None else (qa == qb):
        return None
    items, changed = _item_changes(_items(qa, ra), _items(qb, rb))
    only = changed if _compiled(qa) and _compiled(qb) else None
    entry = {"status": "added" if qa is None else "removed" if qb is None else "both",
             "items": items, "checks": _changes(_checks(qa, only), _checks(qb, only))}
    if entry["status"] != "both" or any(entry[k][c] for k in ("items", "checks") for c in entry[k]):
        return entry
    return None


def diff_lines(diff: dict) -> list[str]:
    lines = []
    for qid, d in diff.items():
        status = {"added": "added", "removed": "removed"}.get(d["status"], "changed")
        lines.append(f"{qid}: {status}")
        for kind in ("items", "checks"):
            c = d[kind]
            word = kind[:-1]
            lines += [f"  + {word} {k}" for k in c["added"]]
            lines += [f"  - {word} {k}" for k in c["removed"]]
            lines += [f"  ~ {word} {k} re-tiered {t0} -> {t1}" for k, t0, t1 in c["retiered"]]
            lines += [f"  ~ {word} {k} reworded" for k in c["reworded"]]
    return lines
