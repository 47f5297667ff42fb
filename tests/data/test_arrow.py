"""numpy <-> pyarrow without pandas: round trips with nulls, offsets and NaN, checked against
pyarrow's own conversions, and no pandas imported on the way."""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pytest

from gamut_local.data import arrow
from gamut_local.testing import processes


def test_dictionary_and_codes_round_trip_with_nulls():
    items = ["b", "é", "a"]
    indices = np.array([2, -1, 0, 1, 1, -1, 2], dtype=np.int32)
    array = arrow.dictionary(indices, items)
    assert array.to_pylist() == [None if i < 0 else items[i] for i in indices]
    got, values = arrow.codes(array)
    assert values == items and got.tolist() == indices.tolist()
    sliced = array.slice(2, 4)  # an offset into the buffers
    assert arrow.codes(sliced)[0].tolist() == indices[2:6].tolist()


def test_encoded_takes_chunked_and_plain_columns():
    chunked = pa.chunked_array([pa.array(["x", None]), pa.array(["y", "x"])])
    codes, values = arrow.encoded(chunked)
    assert [None if c < 0 else values[c] for c in codes] == ["x", None, "y", "x"]
    assert arrow.encoded(chunked.chunk(1))[1] == ["y", "x"]


def test_floats_and_values_with_nulls_and_nan():
    array = pa.array([1.5, None, float("nan"), 4.0]).slice(1, 3)
    got = arrow.floats(array)
    assert np.isnan(got).tolist() == [True, True, False] and got[2] == 4.0
    assert arrow.floats(pa.array([1, 2], pa.int64())).tolist() == [1.0, 2.0]
    assert arrow.values(pa.array([7, 8, 9], pa.int64()).slice(1), np.int64).tolist() == [8, 9]


def test_from_numpy_keeps_nan_as_a_value():
    data = np.array([0.25, np.nan, -1.0])
    array = arrow.from_numpy(data)
    assert array.type == pa.float64() and array.null_count == 0
    assert np.array_equal(arrow.values(array, np.float64), data, equal_nan=True)
    assert arrow.from_numpy(np.arange(3, dtype=np.int32)).to_pylist() == [0, 1, 2]
    with pytest.raises(TypeError, match="numeric"):
        arrow.from_numpy(np.array(["a"]))


def test_no_pandas_is_imported():
    code = ("import sys, numpy as np; from gamut_local.data import arrow; "
            "a = arrow.dictionary(np.array([0, -1]), ['x']); arrow.codes(a); arrow.floats(arrow.from_numpy(np.ones(2))); "
            "print('pandas' in sys.modules)")
    # 120 s: one Python start-up with numpy and pyarrow, on a busy machine.
    out = processes.run([sys.executable, "-c", code], timeout=120, waiting_for="the import check")
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
