"""The duplicate rule's search (`rubric.lint.duplicate_checks`): for each check, the first
earlier check of another item whose content words have Jaccard similarity at or above a
threshold, found without comparing every pair.

Prefix filtering (Chaudhuri, Ganti and Kaushik 2006; Xiao et al. 2008): with the words of each
set in one global order (rarest first), two sets of Jaccard >= t share a word among the first
|x| - ceil(t|x|) + 1 of each, because J >= t needs |x & y| >= t * max(|x|, |y|). So only sets
that share one of those prefix words are scored. Exact, not sampled: the same Jaccard, by the
same float division, as comparing every pair (`testing.authoring.all_pairs_near_duplicates`,
the tests' oracle).

Everything after the words is numpy over (set, word) pairs, so one call over a whole rubric of
100,000 items, or over a chunk of questions at once (`scopes`), costs no Python per word; the
ASCII texts' words are split and numbered by pyarrow (C++), the others by `content_words`.
"""

from __future__ import annotations

import re
from itertools import pairwise

import numpy as np

STOP = {
    *(
        "a an the of to in on at for by with and or as is are was were be been it its this that "
        "these those their his her from into about one response mentions states following covers "
        "least point"
    ).split()
}
_WORD = re.compile(r"[a-z0-9]+")
# every byte but a-z and 0-9 becomes a space: `_WORD`'s runs, for ASCII text, without a regex
_SPACES = bytes(c if chr(c) in "abcdefghijklmnopqrstuvwxyz0123456789" else 32 for c in range(256))
# From this many texts pyarrow splits and numbers the words. Loading it costs ~0.4 s per
# process (lint of 1,000 items takes 0.3 s longer), but a worker's chunk of 100 questions
# (~1,500-3,000 texts) is split in half the time of Python's: at 100,000 items, the most of it
PYARROW_FROM = 1_000
_SIGNED: set = set()  # pyarrow's ids of the signed integer types (filled on first use, with pyarrow)
_PAIRS_AT_ONCE = 250_000  # candidate pairs scored in one block: bounds memory however many share a word


def content_words(text: str) -> set[str]:
    """A check's words for the rule: lower-case runs of letters and digits, less `STOP`."""
    return set(_WORD.findall(text.lower())) - STOP


def _string_array(values: list[str]):
    """An Arrow array of ASCII texts, made from its buffers: `pa.array` of a Python list
    imports pandas first (0.5-1 s, more than the search of a 1,000-item rubric)."""
    import pyarrow as pa

    raw = "".join(values).encode("ascii")
    offsets = np.cumsum([0, *map(len, values)], dtype=np.int32)
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(raw))


def _numbers(array) -> np.ndarray:
    """An Arrow array of integers without nulls as numpy, read from its buffer: pyarrow's
    `to_numpy` (and any Python value handed to pyarrow) imports pandas first, 0.5-1 s."""
    if array.null_count:
        raise ValueError("nulls where none can be")
    dtype = np.dtype(f"{'i' if array.type.id in _SIGNED else 'u'}{array.type.bit_width // 8}")
    return np.frombuffer(array.buffers()[1], dtype)[array.offset:array.offset + len(array)]


def _ascii_word_ids(joined: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow as pa
    import pyarrow.compute as pc

    _SIGNED.update(t.id for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64()))
    raw = joined.encode("ascii")
    ends = np.flatnonzero(np.frombuffer(raw, np.uint8) == 0) + 1  # each separator closes a text
    small = len(raw) < 2**31  # 32-bit offsets: pyarrow finds a list's parents 40x faster than with 64
    offsets = np.concatenate([[0], ends, [len(raw)]]).astype(np.int32 if small else np.int64)
    texts = (pa.StringArray if small else pa.LargeStringArray).from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(raw.translate(_SPACES)))
    lists = pc.ascii_split_whitespace(texts)
    encoded = pc.dictionary_encode(pc.list_flatten(lists))
    words = encoded.dictionary
    stop = _numbers(pc.cast(pc.is_in(words, value_set=_string_array(sorted(STOP))), pa.uint8()))
    drop = (stop == 1) | (_numbers(pc.binary_length(words)) == 0)  # "": around spaces
    ids = _numbers(encoded.indices).astype(np.int64)
    owner = _numbers(pc.list_parent_indices(lists)).astype(np.int64)
    keep = ~drop[ids]
    return owner[keep], ids[keep]


def word_ids(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(text index, word id) for each distinct content word of each text (`content_words`),
    sorted by text then word id."""
    return _distinct(*_word_pairs(texts))


def _word_pairs(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """`word_ids`, in no order, a word repeated in a text as often as it is."""
    many = len(texts) >= max(PYARROW_FROM, 1)
    joined = "\x00".join(texts).lower() if many else ""
    if many and joined.isascii() and joined.count("\x00") == len(texts) - 1:
        owner, ids = _ascii_word_ids(joined, len(texts))
    else:  # few texts, other scripts, or a text holding the separator: one by one
        vocab: dict[str, int] = {}
        pairs = [(k, vocab.setdefault(w, len(vocab))) for k, t in enumerate(texts) for w in content_words(t)]
        owner = np.fromiter((k for k, _ in pairs), np.int64, len(pairs))
        ids = np.fromiter((w for _, w in pairs), np.int64, len(pairs))
    return owner, ids


def _distinct(owner: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (owner, id) pairs sorted, each once (np.sort, not np.unique: numpy 2.3's unique
    took 60x a sort on 4 million integers)."""
    span = int(ids.max()) + 1 if len(ids) else 1
    key = np.sort(owner * span + ids)
    key = key[np.r_[True, key[1:] != key[:-1]]] if len(key) else key
    return key // span, key % span


def _dense(keys: np.ndarray) -> np.ndarray:
    """Each key's rank among the distinct keys (0, 1, ...)."""
    order = np.argsort(keys, kind="stable")
    ranks = np.empty(len(keys), np.int64)
    ranks[order] = np.cumsum(np.r_[False, keys[order][1:] != keys[order][:-1]]) if len(keys) else []
    return ranks


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """range(s, s + n) for each (s, n), concatenated."""
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))


def _shared(words: np.ndarray, starts: np.ndarray, sizes: np.ndarray, i: np.ndarray, j: np.ndarray,
            span: int) -> np.ndarray:
    """|set i & set j| for each pair: each word of both sides keyed by its pair; a key seen
    twice is shared."""
    keys = np.concatenate([np.repeat(np.arange(len(i)), sizes[s]) * span + words[_ranges(starts[s], sizes[s])]
                           for s in (i, j)])
    keys.sort()
    return np.bincount(keys[1:][keys[1:] == keys[:-1]] // span, minlength=len(i))


def _candidates(word: np.ndarray, member: np.ndarray):
    """Blocks of (a, b), places in `member` of every two members of a run of one word
    (`word` sorted, then `member`), a before b: each member pairs with the earlier members of
    its run."""
    run = np.flatnonzero(np.r_[True, word[1:] != word[:-1]]) if len(word) else np.zeros(0, np.int64)
    first = np.repeat(run, np.diff(np.r_[run, len(word)]))
    earlier = np.arange(len(word)) - first
    block = np.cumsum(earlier) // _PAIRS_AT_ONCE
    cuts = [0, *(np.flatnonzero(np.diff(block)) + 1).tolist(), len(word)]
    for lo, hi in pairwise(cuts):
        m = np.arange(lo, hi)
        yield _ranges(first[m], earlier[m]), np.repeat(m, earlier[m])


def first_near_duplicates(texts: list[str], groups: list, threshold: float = 0.85,
                          scopes=None) -> dict[int, int]:
    """j -> the first i < j whose content words have Jaccard >= `threshold` with j's, from
    another group (`groups[i] is None` or differs); with `scopes`, of the same scope (a chunk
    of questions searched at once, each question its own scope)."""
    n = len(texts)
    owner, word = _word_pairs(texts)  # repeats are dropped below, in the one sort the search needs
    # a text without content words gets a word of its own kind: Jaccard 1 with another such
    # text, as between two empty sets, and 0 with the rest
    empty = np.flatnonzero(np.bincount(owner, minlength=n) == 0)
    span = int(word.max()) + 2 if len(word) else 1
    owner, word = np.concatenate([owner, empty]), np.concatenate([word, np.full(len(empty), span - 1)])
    scopes = None if scopes is None else np.asarray(scopes, np.int64)
    if scopes is not None and len(scopes) and (scopes != scopes[0]).any():  # a word of another scope is another word
        word = _dense(scopes[owner] * span + word)
    vocab = int(word.max()) + 1 if len(word) else 1
    # Rarest first, ties by id. Any one order of the words finds the same pairs (prefix
    # filtering only needs every set's words in one global order), so a word repeated within
    # a text may count twice: its repeats go in the same sort as the order, not one before
    rank = np.empty(vocab, np.int64)
    rank[np.argsort(np.bincount(word, minlength=vocab), kind="stable")] = np.arange(vocab)
    key = np.sort(owner * vocab + rank[word])
    key = key[np.r_[True, key[1:] != key[:-1]]] if len(key) else key  # each word once per set
    owner, word = key // vocab, key % vocab  # each set's words, rarest first
    sizes = np.bincount(owner, minlength=n)
    starts = np.cumsum(sizes) - sizes
    # ceil(t*|x|) less a hair, so float rounding can only lengthen the prefix (never miss)
    prefix = sizes - np.ceil(threshold * sizes - 1e-9).astype(np.int64) + 1
    place = np.arange(len(word)) - starts[owner]  # of each word in its set
    in_prefix = place < prefix[owner]
    ids = {g: k for k, g in enumerate(dict.fromkeys(groups))}  # each group a number, without a loop per text
    group = np.fromiter(map(ids.__getitem__, groups), np.int64, n)
    if None in ids:  # None is another group than every text's, its own included
        alone = np.flatnonzero(group == ids[None])
        group[alone] = -1 - alone
    order = np.lexsort((owner[in_prefix], word[in_prefix]))
    member, place = owner[in_prefix][order], place[in_prefix][order]
    near = [np.zeros(0, np.int64)]
    for a, b in _candidates(word[in_prefix][order], member):
        i, j = member[a], member[b]
        # Positional filter (Xiao et al. 2008): if this is the first word two sets share, they
        # share at most it and the words after it in each. Where that many cannot reach the
        # threshold (by the same float division as below: it rises with the count), the pair
        # is dropped here; a near pair is scored through its first shared word, which lies in
        # both prefixes, and there the bound holds.
        most = np.minimum(sizes[i] - place[a], sizes[j] - place[b])
        keep = (group[i] != group[j]) & (most / (sizes[i] + sizes[j] - most) >= threshold)
        i, j = i[keep], j[keep]
        both = _shared(word, starts, sizes, i, j, vocab)
        hit = both / (sizes[i] + sizes[j] - both) >= threshold
        near.append(j[hit] * n + i[hit])
    pairs = np.sort(np.concatenate(near))  # by j, then i: the first of each j is its earliest i
    j, i = pairs // n, pairs % n
    first = np.r_[True, j[1:] != j[:-1]] if len(j) else np.zeros(0, bool)
    return dict(zip(j[first].tolist(), i[first].tolist()))
