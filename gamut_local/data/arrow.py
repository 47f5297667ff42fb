"""numpy <-> pyarrow without pandas, for the project's columns.

pyarrow's own `to_numpy`, `pa.array` and `pa.scalar` import pandas whenever it is installed
(0.16-0.2 s, on every command that touches a column); the converters below build on the
arrays' buffers instead, zero-copy where the layouts agree.
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
