"""numpy <-> pyarrow without pandas: round trips with nulls, offsets and NaN, checked against
pyarrow's own conversions, and no pandas imported on the way."""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pytest

from gamut_local import arrow
from tests.support import processes


def test_dictionary_and_codes_round_trip_with_nulls():
    items = ["b", "é", "a"]
    indices = np.array([2, -1, 0, 1, 1, -1, 2], dtype=np.int32)
    array = pa.DictionaryArray.from_arrays(pa.array(indices, mask=indices < 0), pa.array(items))
    assert array.to_pylist() == [None if i < 0 else items[i] for i in indices]
    got, values = arrow.codes(array)
    assert values == items and got.tolist() == indices.tolist()
    sliced = array.slice(2, 4)  # an offset into the buffers
    assert arrow.codes(sliced)[0].tolist() == indices[2:6].tolist()


def test_strings_gathers_the_items_bytes_with_nulls():
    items = ["b", "é", "", "abc"]
    indices = np.array([3, -1, 0, 1, 2, 1, -1], dtype=np.int32)
    array = arrow.strings(indices, items)
    assert array.to_pylist() == [None if i < 0 else items[i] for i in indices]
    assert array.equals(pa.array([None if i < 0 else items[i] for i in indices], pa.string()))
    assert arrow.strings(np.zeros(0, dtype=np.int32), []).to_pylist() == []


def test_read_columns_gives_numpy_columns(tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"s": ["x", None, "y", "x"], "f": [1.5, None, 2.0, 0.0], "b": [True, False, True, True],
                             "i": pa.array([1, 2, 3, 4], pa.int32())}), path)
    cols = arrow.read_columns(path)
    codes, values = cols["s"]
    assert [None if c < 0 else values[c] for c in codes] == ["x", None, "y", "x"]
    assert np.array_equal(cols["f"], [1.5, np.nan, 2.0, 0.0], equal_nan=True)
    assert cols["b"].tolist() == [True, False, True, True] and cols["i"].dtype == np.int64


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
    nulls = arrow.from_numpy(data, ~np.isnan(data))  # where the caller says so: null
    assert nulls.null_count == 1 and nulls.to_pylist() == [0.25, None, -1.0]
    assert arrow.from_numpy(data, np.ones(3, dtype=bool)).null_count == 0


@pytest.mark.parametrize("jsonl", [False, True])
def test_reading_the_store_imports_neither_pandas_nor_pyarrow_compute(tmp_path, jsonl):
    """pandas (0.3-0.7 s, through pyarrow.dataset or `pa.array` over Python lists) and
    pyarrow.compute (0.1 s) are start-up cost on every command that writes the store, reads
    verdicts or a per-response file. A JSONL verdict file read column-wise imports
    pyarrow.compute (its strings become dictionaries there: 10 ms a 13 MB file, against 30-40 ms
    in numpy or Python), never pandas."""
    import pyarrow.parquet as pq

    from gamut_local.rundir.store import write_jsonl
    from tests.support.synthetic import make_records

    if jsonl:
        write_jsonl(tmp_path / "verdicts" / "j" / "n.multimodal.jsonl",
                    make_records(judges=(("j", 1.0),), models=("n",), questions=3))
    pq.write_table(pa.table({"s": ["x", "y"], "b": [True, False]}), tmp_path / "r.parquet")
    unit = tmp_path / "verdicts" / "j" / "m.multimodal.parquet"
    code = ("import sys, numpy as np; from gamut_local import arrow; "
            "from gamut_local.data.verdict_table import read_verdicts; "
            "from gamut_local.rundir import verdict_store; from tests.support.synthetic import make_records; "
            f"from pathlib import Path; u = Path({str(unit)!r}); "
            "verdict_store.write_part(u, make_records(judges=(('j', 1.0),), models=('m',), questions=3)); "
            "verdict_store.compact(u); "
            f"t = read_verdicts([{str(tmp_path)!r}]); arrow.read_columns({str(tmp_path / 'r.parquet')!r}); "
            "arrow.strings(np.array([0, -1]), ['x']); arrow.floats(arrow.from_numpy(np.ones(2))); "
            "print(','.join(t.models), sorted(m for m in ('pandas', 'pyarrow.compute', 'pyarrow.dataset') if m in sys.modules))")
    # 120 s: one Python start-up with numpy and pyarrow, on a busy machine.
    out = processes.run([sys.executable, "-c", code], timeout=120, waiting_for="the import check")
    want = "['pyarrow.compute']" if jsonl else "[]"
    assert out.returncode == 0 and out.stdout.split(" ", 1)[1].strip() == want, (out.stdout, out.stderr)
    assert out.stdout.split(" ", 1)[0] == ("m,n" if jsonl else "m")  # the store's verdicts and the JSONL file's


def test_whole_takes_one_chunk_as_it_is_and_joins_several():
    one = pa.chunked_array([pa.array([1.0, 2.0])])
    assert arrow.whole(one).buffers()[1].address == one.chunk(0).buffers()[1].address  # no copy
    several = pa.chunked_array([pa.array(["a", "b"]).dictionary_encode(), pa.array(["c", "a"]).dictionary_encode()])
    joined = arrow.whole(several)  # one array, the two dictionaries unified
    codes, values = arrow.codes(joined)
    assert [values[c] for c in codes] == joined.to_pylist() == ["a", "b", "c", "a"]
