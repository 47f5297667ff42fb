"""The YAML that `export` writes and `import` reads, without PyYAML's Python layers.

An exported rubric is block mappings and sequences of plain keys, plain text, whole numbers,
booleans and nulls. For that subset, `dump` writes the very bytes libyaml's safe emitter
writes (long plain texts folded at the same spaces); anything else (a text that needs
quotes, a float) makes it return None and the caller uses PyYAML. `load` reads any YAML
through libyaml's parser, the strict loader's own, and makes the values straight from its
events with PyYAML's resolver rules; where the strict loader (`config.load_yaml_node`)
would refuse, or might read otherwise (anchors, tags, keys given twice), it returns None
and the caller uses that loader, which has the messages. A fast path, never a second
dialect. At 100,000 items PyYAML's representer, resolver, composer and constructor took
most of `export`'s and `import`'s time.

`tests/rubric/test_fast_yaml.py` holds both to PyYAML on hostile texts.
"""

from __future__ import annotations

import re

from yaml import ScalarNode
from yaml._yaml import CParser
from yaml.constructor import SafeConstructor
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.resolver import Resolver

WIDTH = 100  # libyaml folds a plain scalar at the first lone space past this column

# What libyaml writes as plain text in a block: printable characters only (libyaml's own
# set: no tab, no C1 controls, no BOM, no line separators, nothing past U+FFFF), not starting
# with an indicator or a space, no ": " or " #" inside, no ":" or space at the end. Stricter
# than libyaml (no "-", "?", ":", "." first at all, no other space than U+0020 first) where
# that keeps the rule short.
_PLAIN = re.compile("(?![\\s\\-?:,.\\[\\]{}#&*!|>'\"%@`])[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]+")
_KEY_MAX = 100  # libyaml writes a key over 128 characters as "? key"; stay well below
_RESOLVERS = Resolver.yaml_implicit_resolvers  # first character -> [(tag, rule)], as PyYAML resolves


class Unsupported(Exception):
    """The value or text is outside the subset: use PyYAML."""


def is_plain(text: str) -> bool:
    """Whether libyaml writes `text` as a plain scalar that reads back as this string (a
    plain text PyYAML reads as another type, "yes", "0x10", "~", "2020-01-01", is quoted)."""
    if _PLAIN.fullmatch(text) is None or ": " in text or " #" in text or text[-1] in ": ":
        return False
    rules = _RESOLVERS.get(text[0])
    if rules:
        for _, rule in rules:
            if rule.match(text):
                return False
    return True


_LONE_SPACE = re.compile(r"(?<=[^ ]) (?=[^ ])")


def _fold(text: str, column: int, indent: int, pad: str) -> str:
    """`text` written from `column` as libyaml writes a plain or single-quoted scalar: at a
    space between two other characters once the line is past WIDTH, a line break and
    `indent` spaces instead."""
    if column + len(text) <= WIDTH + 1:  # no space can be past WIDTH
        return text
    out, start, line_start = [], 0, column
    for m in _LONE_SPACE.finditer(text):
        j = m.start()
        if line_start + (j - start) > WIDTH:
            out.append(text[start:j])
            start, line_start = j + 1, indent
    out.append(text[start:])
    return ("\n" + pad + " " * indent).join(out)


# What libyaml writes in single quotes when it cannot write it plain: printable characters
# only (a line break, tab or anything libyaml escapes takes double quotes: PyYAML's job).
_QUOTABLE = re.compile("[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*")


def _single_quoted(text: str) -> bool:
    """Whether libyaml writes `text` in single quotes; False also where `is_plain`, stricter
    than libyaml, cannot tell (a first "-", "?", ":", "." or non-ASCII space)."""
    if text and (text[0] in "-?:." or (text[0] != " " and text[0].isspace())):
        return False
    return _QUOTABLE.fullmatch(text) is not None


def _scalar(value, column: int, indent: int, pad: str) -> str:
    kind = type(value)
    if kind is str:
        if is_plain(value):
            return _fold(value, column, indent, pad)
        if _single_quoted(value):
            return "'" + _fold(value.replace("'", "''"), column + 1, indent, pad) + "'"
        raise Unsupported
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    raise Unsupported  # floats and anything else: PyYAML's representer


_KEYS: set[str] = set()  # keys seen to be plain: a rubric has few distinct ones


def _mapping(d: dict, indent: int, out: list[str], pad: str) -> None:
    for key, value in d.items():
        if key not in _KEYS:
            if type(key) is not str or len(key) > _KEY_MAX or not is_plain(key):
                raise Unsupported
            if len(_KEYS) < 10_000:
                _KEYS.add(key)
        head = f"{pad}{' ' * indent}{key}:"
        kind = type(value)
        if kind is dict and value:
            out.append(head + "\n")
            _mapping(value, indent + 2, out, pad)
        elif kind is list and value:
            out.append(head + "\n")
            _sequence(value, indent, out, pad)  # libyaml's sequences in a mapping are not indented
        else:
            out.append(f"{head} {_empty_or_scalar(value, indent + len(key) + 2, indent + 2, pad)}\n")


def _sequence(values: list, indent: int, out: list[str], pad: str) -> None:
    for value in values:
        kind = type(value)
        if kind in (dict, list) and value:
            at = len(out)
            (_mapping if kind is dict else _sequence)(value, indent + 2, out, pad)
            out[at] = f"{pad}{' ' * indent}- {out[at][len(pad) + indent + 2:]}"  # "- " on the first line
        else:
            out.append(f"{pad}{' ' * indent}- {_empty_or_scalar(value, indent + 2, indent + 2, pad)}\n")


def _empty_or_scalar(value, column: int, indent: int, pad: str) -> str:
    if type(value) is dict and not value:
        return "{}"
    if type(value) is list and not value:
        return "[]"
    return _scalar(value, column, indent, pad)


def dump(value, indent: int = 0) -> str | None:
    """What `yaml.dump(value, Dumper=CSafeDumper, sort_keys=False, allow_unicode=True,
    width=WIDTH, default_flow_style=False)` writes for a non-empty dict or list, each line
    after `indent` spaces; None outside the subset."""
    out: list[str] = []
    try:
        if type(value) is dict and value:
            _mapping(value, 0, out, " " * indent)
        elif type(value) is list and value:
            _sequence(value, 0, out, " " * indent)
        else:
            return None
    except Unsupported:
        return None
    except RecursionError:
        return None
    return "".join(out)


# ---- reading ------------------------------------------------------------------------------

_SAFE = SafeConstructor()
_SCALARS = {"tag:yaml.org,2002:bool": _SAFE.construct_yaml_bool, "tag:yaml.org,2002:int": _SAFE.construct_yaml_int,
            "tag:yaml.org,2002:float": _SAFE.construct_yaml_float, "tag:yaml.org,2002:null": _SAFE.construct_yaml_null}
_MAX_DEPTH = 50  # deeper: the strict loader's own answer ("nested too deeply" where it is)
_NO_KEY = object()


def load(text: str):
    """The value `config.load_yaml_node(text)` reads, by the same parser (libyaml's), each
    value made straight from the parser's events; None (read it with the strict loader) for
    a text with an anchor, alias or tag, a key given twice, a key that is a collection, a
    plain scalar read as other than a string, number, boolean or null, no document or more
    than one, or one the parser refuses: the strict loader has the messages for those."""
    try:
        parser = CParser(text)
    except Exception:  # noqa: BLE001 - whatever it is, the strict loader says it
        return None
    try:
        return _build(parser.get_event)
    except Exception:  # noqa: BLE001 - Unsupported, or the parser's error: the strict loader's turn
        return None
    finally:
        parser.dispose()


def _build(get):
    if type(get()) is not StreamStartEvent or type(get()) is not DocumentStartEvent:
        raise Unsupported
    stack: list = []  # the open collections, innermost last
    keys: list = []  # for each: the key read and waiting for its value (mappings)
    root = _NO_KEY
    while True:
        event = get()
        kind = type(event)
        if kind is ScalarEvent:
            if event.anchor is not None or event.tag is not None:
                raise Unsupported
            value = _plain(event.value) if event.implicit[0] else event.value
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            if event.anchor is not None or event.tag is not None or len(stack) >= _MAX_DEPTH:
                raise Unsupported
            value = {} if kind is MappingStartEvent else []
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            stack.pop()
            keys.pop()
            continue
        elif kind is DocumentEndEvent and root is not _NO_KEY and type(get()) is StreamEndEvent:
            return root
        else:  # an alias, a second document, an empty one
            raise Unsupported
        if not stack:
            root = value
        elif type(stack[-1]) is list:
            stack[-1].append(value)
        elif keys[-1] is _NO_KEY:
            if type(value) is dict or type(value) is list or value in stack[-1]:
                raise Unsupported  # a collection as a key, or a key given twice
            keys[-1] = value
        else:
            stack[-1][keys[-1]] = value
            keys[-1] = _NO_KEY
        if type(value) is dict or type(value) is list:
            stack.append(value)
            keys.append(_NO_KEY)


def _plain(text: str):
    """A plain scalar as PyYAML's resolver and safe constructor read it: a string unless one
    of the resolver's rules for its first character matches."""
    for tag, rule in _RESOLVERS.get(text[0] if text else "", ()):
        if rule.match(text):
            make = _SCALARS.get(tag)
            if make is None:  # a date, a merge key, "=": leave them to PyYAML
                raise Unsupported
            return make(ScalarNode(tag, text))
    return text
