"""pyarrow for the project's columns: which JSONL bytes its reader may be given, and numpy <->
pyarrow without pandas.

`jsonl_lines` guards pyarrow's JSON reader: it recurses, and a line nested deep enough
(between 5,000 and 20,000 levels) kills the process where `json.loads` says "nested too
deeply"; and it checks neither the UTF-8 of its string columns nor fields outside its schema.
pyarrow's own `to_numpy`, `pa.array` and `pa.scalar` import pandas whenever it is installed
(0.16-0.2 s, on every command that touches a column); the converters below build on the
arrays' buffers instead, zero-copy where the layouts agree.
"""

from __future__ import annotations

import numpy as np

# Deeper than this, a line goes to the strict reader (json.loads stops near 1,000 levels too).
MAX_DEPTH = 1000
OPENERS, CLOSERS = np.frombuffer(b"{[", dtype=np.uint8), np.frombuffer(b"}]", dtype=np.uint8)


def jsonl_lines(raw) -> int:
    """The number of lines of JSONL bytes that pyarrow's JSON reader may be given, or 0 if it
    may not: empty, not UTF-8, or a line that may nest deeper than MAX_DEPTH (brackets
    inside strings count too: a false alarm only costs speed). `read_jsonl` compares the
    count with the rows read."""
    data = np.frombuffer(raw, dtype=np.uint8)
    if not len(data) or not _is_utf8(raw):
        return 0
    newline = data == ord("\n")
    if not _no_long_lines(newline) and _may_nest_deep(data, newline):
        return 0
    return int(np.count_nonzero(newline) + (data[-1] != ord("\n")))


def read_jsonl(raw, parse_options, read_options=None):
    """pyarrow's table of JSONL bytes, one row per line; None where the bytes are not for its
    reader (`jsonl_lines`) or a line did not make exactly one row: pyarrow takes two objects
    on one line, which `json.loads` refuses, and skips a blank line, which would shift line
    numbers. pyarrow's own errors (a type that changes, a repeated key) propagate."""
    import pyarrow as pa
    import pyarrow.json as pj

    lines = jsonl_lines(raw)
    if not lines:
        return None
    table = pj.read_json(pa.BufferReader(pa.py_buffer(raw)), parse_options=parse_options, read_options=read_options)
    return table if table.num_rows == lines else None


def _no_long_lines(newline: np.ndarray) -> bool:
    """No line is longer than 2 * MAX_DEPTH bytes, so none nests deeper than MAX_DEPTH (a
    line of n bytes nests at most n / 2 deep). Such a line would cover a whole aligned
    block of MAX_DEPTH bytes, so: every block has a newline. Cheaper than finding the lines."""
    blocks = len(newline) // MAX_DEPTH
    return bool(newline[:blocks * MAX_DEPTH].reshape(blocks, MAX_DEPTH).any(axis=1).all())


def _may_nest_deep(data: np.ndarray, newline: np.ndarray) -> bool:
    """Some line nests deeper than MAX_DEPTH."""
    ends = np.flatnonzero(newline)
    starts = np.r_[0, ends + 1]
    stops = np.r_[ends, len(data)]
    for k in np.flatnonzero(stops - starts > 2 * MAX_DEPTH):
        line = data[starts[k]:stops[k]]
        step = np.isin(line, OPENERS).astype(np.int32) - np.isin(line, CLOSERS)
        if np.cumsum(step).max() > MAX_DEPTH:
            return True
    return False


def _is_utf8(raw) -> bool:
    """The bytes are UTF-8, as `json.loads` of each line requires. One SIMD pass, in place."""
    import pyarrow as pa

    offsets = pa.py_buffer(np.array([0, len(raw)], dtype=np.int64))
    whole = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(raw)])
    try:
        whole.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def values(array, dtype) -> np.ndarray:
    """A primitive pyarrow array's value buffer as numpy (no copy; null slots hold whatever
    the buffer holds: see `valid`)."""
    dtype = np.dtype(dtype)
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array),
                         offset=array.offset * dtype.itemsize)


def valid(array) -> np.ndarray:
    """Which entries of a pyarrow array are not null, as booleans."""
    if array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    bits = np.unpackbits(np.frombuffer(array.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[array.offset:array.offset + len(array)].astype(bool)


def floats(array) -> np.ndarray:
    """A numeric pyarrow array as float64, NaN where null."""
    import pyarrow as pa

    out = values(array.cast(pa.float64()), np.float64)
    return out if array.null_count == 0 else np.where(valid(array), out, np.nan)


def codes(array) -> tuple[np.ndarray, list[str]]:
    """(codes, dictionary) of a pyarrow dictionary array of strings, code -1 where null."""
    import pyarrow as pa

    got = np.where(valid(array), values(array.indices.cast(pa.int32()), np.int32), -1)
    return got.astype(np.int32), array.dictionary.to_pylist()


def encoded(column) -> tuple[np.ndarray, list[str]]:
    """(codes, dictionary) of a string column, chunked or not."""
    column = column.dictionary_encode()
    return codes(column.combine_chunks() if hasattr(column, "chunks") else column)


def from_numpy(data: np.ndarray):
    """A 1-d numeric numpy array as a pyarrow array (NaN stays NaN, not null)."""
    import pyarrow as pa

    data = np.ascontiguousarray(data)
    if data.dtype.kind not in "iuf":
        raise TypeError(f"not a numeric array: {data.dtype}")
    return pa.Array.from_buffers(pa.from_numpy_dtype(data.dtype), len(data), [None, pa.py_buffer(data)])


def strings(items: list[str]):
    """A pyarrow string array of `items`."""
    import pyarrow as pa

    raw = [s.encode("utf-8") for s in items]
    offsets = np.zeros(len(raw) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in raw], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(raw), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(raw))])


def dictionary(indices: np.ndarray, items: list[str]):
    """A pyarrow dictionary array of strings: `items[indices[i]]`, null where the index is -1."""
    import pyarrow as pa

    indices = np.asarray(indices, dtype=np.int32)
    present = indices >= 0
    bitmap = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.DictionaryArray.from_buffers(pa.dictionary(pa.int32(), pa.string()), len(indices),
                                           [bitmap, pa.py_buffer(np.maximum(indices, 0))],
                                           dictionary=strings(items))
