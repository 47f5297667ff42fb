"""numpy <-> pyarrow without pandas, for the project's columns, and JSON Lines bytes as columns.

pyarrow's own `to_numpy`, `pa.array` and `pa.scalar` import pandas whenever it is installed
(0.16-0.2 s, on every command that touches a column); the converters below build on the
arrays' buffers instead, zero-copy where the layouts agree.

`jsonl_table` hands JSON Lines bytes to pyarrow's JSON reader (C++, multi-threaded) only where
its table is the one `json.loads` line by line would give: pyarrow checks neither the UTF-8 of
string values nor that a line holds one object (it takes two on a line, skips a blank line and
splits at a lone carriage return, any of which would shift the line numbers), and accepts a
byte-order mark, NaN and Infinity. It does refuse what else `json.loads` refuses (a repeated
key, a lone surrogate, a control character in a string) and, with
`unexpected_field_behavior="error"`, stops at the first field outside its schema, so a line
nested however deep never reaches its recursive type inference (which crashes the process
between 1,000 and 10,000 levels).
"""

from __future__ import annotations

import numpy as np


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


def whole(column):
    """A chunked array as one array: its one chunk as it is (`combine_chunks` copies even that)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def floats(array) -> np.ndarray:
    """A numeric pyarrow array as float64, NaN where null."""
    import pyarrow as pa

    # A cast imports pyarrow.compute (0.1 s): only where the type is not float64 already.
    out = values(array if array.type == pa.float64() else array.cast(pa.float64()), np.float64)
    return out if array.null_count == 0 else np.where(valid(array), out, np.nan)


def codes(array) -> tuple[np.ndarray, list[str]]:
    """(codes, dictionary) of a pyarrow dictionary array of strings, code -1 where null."""
    import pyarrow as pa

    indices = array.indices if array.indices.type == pa.int32() else array.indices.cast(pa.int32())
    got = values(indices, np.int32)  # no copy (read-only) where there is no null
    if array.null_count:
        got = np.where(valid(array), got, np.int32(-1))
    return got, array.dictionary.to_pylist()


def from_numpy(data: np.ndarray, valid: np.ndarray | None = None):
    """A 1-d numeric numpy array as a pyarrow array: null where `valid` is False (NaN stays
    NaN, not null, unless `valid` says so)."""
    import pyarrow as pa

    data = np.ascontiguousarray(data)
    if data.dtype.kind not in "iuf":
        raise TypeError(f"not a numeric array: {data.dtype}")
    bitmap = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.from_numpy_dtype(data.dtype), len(data), [bitmap, pa.py_buffer(data)])


def strings(indices: np.ndarray, items: list[str]):
    """A pyarrow string array of `items[indices[i]]`, null where the index is -1, its bytes
    gathered by numpy (a dictionary array's `cast` to strings would import pyarrow.compute)."""
    import pyarrow as pa

    indices = np.asarray(indices, dtype=np.int64)
    raw = [s.encode("utf-8") for s in items]
    lengths = np.array([len(b) for b in raw] + [0], dtype=np.int64)  # index -1: the empty last
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    size = lengths[indices]
    offsets = np.zeros(len(indices) + 1, dtype=np.int64)
    np.cumsum(size, out=offsets[1:])
    # Output byte i of row r is item byte starts[indices[r]] + (i - offsets[r]).
    data = np.frombuffer(b"".join(raw) or b"\0", dtype=np.uint8)[
        np.repeat(starts[indices] - offsets[:-1], size) + np.arange(offsets[-1])]
    present = indices >= 0
    bitmap = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), len(indices),
                                 [bitmap, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])


def read_columns(path) -> dict:
    """A Parquet file's columns as numpy, without pandas or pyarrow.compute (0.1 s to import):
    strings as (codes, dictionary) pairs (`codes`), floats as float64 with NaN for null,
    booleans as bool, other integers as int64."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as f:
        strings = [field.name for field in f.schema_arrow if pa.types.is_string(field.type)]
    # Strings decoded straight into dictionary arrays (Parquet stores them so): no re-encoding.
    with pq.ParquetFile(path, read_dictionary=strings) as f:
        table = f.read()
    cols = {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        if pa.types.is_dictionary(column.type):
            cols[name] = codes(column)
        elif pa.types.is_floating(column.type):
            cols[name] = floats(column)
        elif pa.types.is_boolean(column.type):
            bits = np.unpackbits(np.frombuffer(column.buffers()[1], dtype=np.uint8), bitorder="little")
            cols[name] = bits[column.offset:column.offset + len(column)].astype(bool)
        else:
            cols[name] = values(column if column.type == pa.int64() else column.cast(pa.int64()), np.int64)
    return cols


def is_utf8(data) -> bool:
    """Are these bytes UTF-8, as `bytes.decode` wants them? One SIMD pass, no copy."""
    import pyarrow as pa

    offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64))
    whole = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)])
    try:
        whole.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def jsonl_lines(data) -> int:
    """The number of lines of JSON Lines bytes if every one starts with `{` (so none is blank),
    the bytes are UTF-8 and hold no carriage return outside a line's end (`\\r\\n`); else 0."""
    view = np.frombuffer(data, dtype=np.uint8)
    if not len(view) or view[0] != ord("{") or not is_utf8(data):
        return 0
    lines = int(np.count_nonzero(view == ord("\n"))) + (view[-1] != ord("\n"))
    # The lines that start with "{": each "\\n{" at an even or an odd offset, read as one uint16
    # (half the passes of comparing bytes to each other).
    pair = int.from_bytes(b"\n{", "little")
    even = np.frombuffer(data, dtype="<u2", count=len(view) // 2)
    odd = np.frombuffer(data, dtype="<u2", count=(len(view) - 1) // 2, offset=1)
    if 1 + np.count_nonzero(even == pair) + np.count_nonzero(odd == pair) != lines:
        return 0
    if b"\r" in data:  # pyarrow ends a line at a lone carriage return too; `json.loads` does not
        after = np.flatnonzero(view == ord("\r")) + 1
        if after[-1] == len(view) or not (view[after] == ord("\n")).all():
            return 0
    return lines


def jsonl_table(data, schema, *, threads: bool = True):
    """pyarrow's table of JSON Lines bytes read with `schema` (every field a line may hold;
    another is an error), one row per line; None where the bytes are not for its reader
    (`jsonl_lines`) or a line did not make exactly one row. pyarrow's own errors (a type that
    differs from the schema, a repeated key, not JSON) propagate as pa.ArrowInvalid.
    `threads`: parse blocks of 1 MB side by side; else the bytes as one block, in this thread
    (for a caller that reads files side by side: 4-8% less CPU, and no table in 1 MB chunks)."""
    import pyarrow as pa
    import pyarrow.json as pj

    lines = jsonl_lines(data)
    if not lines:
        return None
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    whole = pj.ReadOptions(use_threads=threads, block_size=max(len(data), 1 << 20))
    try:
        table = pj.read_json(pa.BufferReader(data), parse_options=parse,
                             read_options=pj.ReadOptions(use_threads=True) if threads else whole)
    except pa.ArrowInvalid as e:
        if "straddl" not in str(e):
            raise
        # A line across more than two blocks: the bytes as one block.
        table = pj.read_json(pa.BufferReader(data), parse_options=parse, read_options=whole)
    return table if table.num_rows == lines else None
