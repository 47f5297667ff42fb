"""The viewer's column cache: used while its inputs are unchanged, rebuilt when one changes,
never written under --read-only."""

from __future__ import annotations

import json

import numpy as np

from gamut_local.viewer import cache, index
from gamut_local.viewer.index import open_run


def _same(a, b):
    va, vb = a.verdicts, b.verdicts
    return (va.judges, va.systems, va.checks) == (vb.judges, vb.systems, vb.checks) and all(
        np.array_equal(getattr(va, k), getattr(vb, k), equal_nan=True) for k in ("q", "s", "c", "j", "code", "probs"))


def test_a_current_cache_replaces_reading_the_files(sample_run, monkeypatch):
    first = open_run(sample_run, cache="use")
    assert (cache.cache_dir(sample_run) / "meta.json").is_file()

    def no_reading(files):
        raise AssertionError("read the verdict files although the cache is current")

    monkeypatch.setattr(index, "read_table", no_reading)
    second = open_run(sample_run, cache="use")
    assert _same(first, second) and second.cells.disagree.sum() == first.cells.disagree.sum()


def test_a_changed_verdict_file_is_read_again(sample_run):
    open_run(sample_run, cache="use")
    path = min((sample_run / "verdicts" / "synthetic-judge").glob("*.jsonl"))
    lines = path.read_text().splitlines()
    r = json.loads(lines[0])
    r["verdict"] = "contradicts" if r["verdict"] != "contradicts" else "meets"
    path.write_text("\n".join([json.dumps(r)] + lines[1:]) + "\n")
    assert _same(open_run(sample_run, cache="use"), open_run(sample_run, cache="off"))


def test_read_only_writes_no_cache(sample_run):
    open_run(sample_run, cache="read")
    assert not cache.cache_dir(sample_run).exists()
