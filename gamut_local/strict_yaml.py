"""YAML as gamut-local reads every file a person writes (run, model and judge configs,
edited rubrics): safe, a key given twice refused, aliases bounded, and the line of every key
kept so an error can point at it. Below the config models: `rubric` reads edited rubrics
with it without depending on them.
"""

from __future__ import annotations

import re

import yaml


Lines = dict[tuple, int]  # key path (keys and list indexes) -> 1-based line in its YAML file

MAX_YAML_NODES = 100_000  # values that aliases may add to a document; far above any real use


# libyaml's parser where PyYAML was built with it: the pure-Python scanner takes a minute
# on an exported rubric of 20,000 items. The constructor (and so every rule below) is the same.
_SAFE_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SAFE_BASE):
    """Safe YAML with a key given twice refused (PyYAML keeps the last silently) and aliases
    bounded: a cyclic alias, or an alias bomb that would expand to gigabytes, is an error."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode) and not any(k.tag == _MERGE for k, _ in node.value):
            return self._plain_mapping(node, deep)
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise _twice(key, seen[key], key_node)
                seen[key] = key_node.start_mark.line + 1
            except TypeError:  # an unhashable key: PyYAML reports it below
                continue
        return super().construct_mapping(node, deep=deep)

    def _plain_mapping(self, node, deep: bool) -> dict:
        """A mapping without merge keys (all an exported rubric has), checked and built in one
        pass: the same value and errors as above, in half the time on 10,000 files."""
        mapping: dict = {}
        for key_node, value_node in node.value:  # every key first, as above, then the values
            key = self.construct_object(key_node, deep=True)
            try:
                if key in mapping:
                    first = next(k for k, _ in node.value if self.construct_object(k, deep=True) == key)
                    raise _twice(key, first.start_mark.line + 1, key_node)
            except TypeError:  # an unhashable key: PyYAML's own message
                return super().construct_mapping(node, deep=deep)
            mapping[key] = value_node
        for key, value_node in mapping.items():
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


_MERGE = "tag:yaml.org,2002:merge"


def _twice(key, first_line: int, key_node) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(
        None, None, f"key {key!r} appears twice (first on line {first_line})", key_node.start_mark)


# An anchor (`&name`) stands after a space, a flow indicator or at a line's start, never after a
# letter or digit ("R&D" is text). Without one a document has no aliases to check.
_MAYBE_ANCHOR = re.compile(r"(?<!\w)&")


def _check_aliases(node) -> None:
    """Raise on a cyclic alias, or on aliases that add more than MAX_YAML_NODES values to the
    document (an alias bomb); a large document without aliases (an exported rubric of 10,000
    items) is not bounded."""
    memo: dict = {}
    if _expanded_size(node, memo, set()) > len(memo) + MAX_YAML_NODES:
        raise yaml.composer.ComposerError(None, None, f"expands to more than {MAX_YAML_NODES} values "
                                          "through its aliases", node.start_mark)


def _expanded_size(node, memo: dict, stack: set) -> int:
    """Nodes in the document with every alias expanded (memoised: linear in the distinct
    nodes); raises on a cycle."""
    if id(node) in stack:
        raise yaml.composer.ComposerError(None, None, "an alias refers to itself (a cycle)", node.start_mark)
    if id(node) in memo:
        return memo[id(node)]
    stack.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(n, memo, stack) for n in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo, stack) + _expanded_size(v, memo, stack) for k, v in node.value)
    else:
        size = 1
    stack.discard(id(node))
    memo[id(node)] = size
    return size


def _node_lines(node, path: tuple = (), out: Lines | None = None) -> Lines:
    """The line of every key and list item under `node`, by key path; merged keys (`<<`)
    count at the line of their anchor, keys written out win over merged ones."""
    out = {} if out is None else out
    if isinstance(node, yaml.MappingNode):
        merged = [v for k, v in node.value if k.tag == "tag:yaml.org,2002:merge"]
        for k, v in node.value:
            if k.tag != "tag:yaml.org,2002:merge" and isinstance(k, yaml.ScalarNode):
                out.setdefault((*path, k.value), k.start_mark.line + 1)
                _node_lines(v, (*path, k.value), out)
        for v in merged:
            _node_lines(v, path, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out.setdefault((*path, i), item.start_mark.line + 1)
            _node_lines(item, (*path, i), out)
    return out


def load_yaml_lines(text: str) -> tuple[object, Lines]:
    """YAML as our configs are read (safe, no repeated keys, aliases bounded), with the line
    of every key, so an error can say where the key is written."""
    loader = _StrictLoader(text)  # a SafeLoader subclass
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        if "&" in text and _MAYBE_ANCHOR.search(text):  # `in` first: the look-behind scan is slow
            _check_aliases(node)
        return loader.construct_document(node), _node_lines(node)
    finally:
        loader.dispose()


def load_yaml_text(text: str):
    """YAML as our configs are read: safe, no repeated keys, aliases bounded."""
    return load_yaml_lines(text)[0]


def load_yaml_node(text: str):
    """(node tree, value) of one YAML document read as `load_yaml_text` reads it: the tree for
    callers that point at the line of a field (`import` of an edited rubric)."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        if "&" in text and _MAYBE_ANCHOR.search(text):  # `in` first: the look-behind scan is slow
            _check_aliases(node)
        return node, loader.construct_document(node)
    finally:
        loader.dispose()
