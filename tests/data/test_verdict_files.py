"""The columnar cache of verdict files: a second read takes the columns from it and gives the
very same table; an entry that is damaged, made for other bytes or vouches for values the
checks refuse is ignored (the file is parsed again); "read" and "off" write nothing; a cache
that cannot be written never fails a read."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from gamut_local.data import verdict_files
from gamut_local.data import verdict_table as vt
from gamut_local.errors import InputError
from gamut_local.rundir.store import write_jsonl
from gamut_local.testing.synthetic import assert_same_table, make_records


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """This test's own cache folder."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("GAMUT_LOCAL_CACHE", str(folder))
    return folder


@pytest.fixture
def files(tmp_path):
    """Two judges' verdict files of different sizes (one with probabilities, one without)."""
    records = make_records(seed=5, models=("m1", "m2"), variants=("multimodal", "text_only"), questions=9)
    paths = []
    for judge in ("gold", "judge-a"):
        rows = [{**r, "settings_hash": f"h-{judge}", "probs": None if judge == "gold" else
                 {"meets": 0.25, "missing": 0.5, "partially_meets": 0.125, "contradicts": 0.125}}
                for r in records if r["judge"] == judge]
        path = tmp_path / "verdicts" / judge / "all.jsonl"
        write_jsonl(path, rows)
        paths.append(path)
    return paths


def entry_of(path):
    return verdict_files._cache_path(hashlib.sha256(path.read_bytes()).hexdigest())


def no_parse(monkeypatch):
    def refuse(*_):
        raise AssertionError("parsed a file the cache holds")
    monkeypatch.setattr(verdict_files, "_parse", refuse)


def test_a_second_read_comes_from_the_cache_and_is_identical(cache, files, monkeypatch):
    first = vt.read_verdicts(files)
    assert all(entry_of(p).is_file() for p in files)
    assert str(cache) in str(entry_of(files[0]))
    no_parse(monkeypatch)
    assert_same_table(vt.read_verdicts(files), first)
    assert_same_table(vt.read_verdicts(files), vt.read_verdicts_reference(files))


def test_changed_bytes_miss_the_cache(cache, files):
    vt.read_verdicts(files)
    text = files[0].read_text().replace('"meets"', '"missing"', 1)
    files[0].write_text(text)
    assert not entry_of(files[0]).exists()
    assert_same_table(vt.read_verdicts(files), vt.read_verdicts_reference(files))
    assert entry_of(files[0]).is_file()


def _damage(kind: str, entry, other_entry):
    import pyarrow as pa

    raw = entry.read_bytes()
    if kind == "garbage":
        entry.write_bytes(b"not arrow at all")
    elif kind == "truncated":
        entry.write_bytes(raw[: len(raw) // 2])
    elif kind == "another_files_entry":
        entry.write_bytes(other_entry.read_bytes())
    elif kind in ("index_out_of_range", "unsafe_name", "wrong_schema"):
        table = pa.ipc.open_file(pa.py_buffer(raw)).read_all()
        meta = table.schema.metadata
        column = table.column("model").chunk(0)
        if kind == "index_out_of_range":
            indices = np.full(len(column), 7, dtype=np.int32)
            model = pa.DictionaryArray.from_buffers(column.type, len(column), [None, pa.py_buffer(indices)],
                                                    dictionary=column.dictionary)
        elif kind == "unsafe_name":
            model = pa.DictionaryArray.from_arrays(column.indices, pa.array(["../escape"] * len(column.dictionary)))
        else:
            model = column.cast(pa.string())
        table = table.set_column(table.column_names.index("model"), "model", model).replace_schema_metadata(meta)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        entry.write_bytes(sink.getvalue().to_pybytes())


@pytest.mark.parametrize("kind", ["garbage", "truncated", "another_files_entry", "index_out_of_range",
                                  "unsafe_name", "wrong_schema"])
def test_an_unusable_entry_is_ignored_and_replaced(cache, files, kind):
    reference = vt.read_verdicts_reference(files)
    vt.read_verdicts(files)
    entry = entry_of(files[0])
    _damage(kind, entry, entry_of(files[1]))
    damaged = entry.read_bytes()
    assert_same_table(vt.read_verdicts(files), reference)
    assert entry.read_bytes() != damaged  # parsed again and written anew
    assert verdict_files._from_cache(entry, verdict_files.file_record(files[0])) is not None


def test_a_file_the_columns_refuse_is_not_cached(cache, files):
    files[0].write_text(files[0].read_text().replace('"meets"', '"great"', 1))
    with pytest.raises(InputError, match="verdict"):
        vt.read_verdicts(files)
    assert not entry_of(files[0]).exists() and entry_of(files[1]).is_file()


def test_read_and_off_write_nothing(cache, files, monkeypatch):
    vt.read_verdicts(files, cache="read")
    vt.read_verdicts(files, cache="off")
    assert not cache.exists()
    vt.read_verdicts(files)
    no_parse(monkeypatch)
    vt.read_verdicts(files, cache="read")  # reads the entries it may not write
    with pytest.raises(AssertionError, match="parsed a file"):
        vt.read_verdicts(files, cache="off")


def test_a_cache_that_cannot_be_written_never_fails_a_read(tmp_path, files, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("GAMUT_LOCAL_CACHE", str(blocker))
    assert_same_table(vt.read_verdicts(files), vt.read_verdicts_reference(files))


def test_the_reusable_buffer_holds_only_the_current_file(tmp_path):
    big, small = tmp_path / "big", tmp_path / "small"
    big.write_bytes(b"x" * 100_000)
    small.write_bytes(b'{"a": 1}\n')
    verdict_files._read_into_buffer(big)
    view, stat = verdict_files._read_into_buffer(small)
    assert bytes(view) == small.read_bytes() and stat.st_size == len(view)


def test_the_judges_record_fields_are_cached_alike(cache, tmp_path, monkeypatch):
    """A judge-stage record (every field `verdict_record` writes) and a human's record."""
    judge = {"question_id": "q1", "model": "m", "variant": "multimodal", "judge": "j", "check_id": "c1",
             "tier": "valuable", "verdict": "invalid", "raw": "I think so", "probs": None,
             "method": "first_token", "prompt_tokens": 420, "num_cached_tokens": None, "attempts": 2,
             "settings_hash": "abc", "answer_hash": "0123456789ab"}
    human = {**judge, "judge": "human-ann", "verdict": "meets", "raw": None, "note": "looked twice",
             "annotated_at": "2026-12-01T10:00:00.000+00:00", "revision": 1}
    for name, record in (("judge", judge), ("human", human)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps(record) + "\n" + json.dumps({**record, "check_id": "c2"}) + "\n")
        first = vt.read_verdicts([path])
        assert entry_of(path).is_file(), name
        assert_same_table(first, vt.read_verdicts_reference([path]))
        assert_same_table(vt.read_verdicts([path]), first)


def test_past_its_size_the_cache_drops_the_least_recently_used(cache, files, tmp_path):
    import os

    vt.read_verdicts(files)
    old, recent = entry_of(files[0]), entry_of(files[1])
    os.utime(old, ns=(1, 1))  # used long ago
    os.utime(recent, ns=(2, 2))
    vt.read_verdicts([files[1]])  # a hit touches its entry: now the most recent
    size = old.stat().st_size + recent.stat().st_size
    assert recent.stat().st_mtime_ns > 2
    verdict_files.prune_cache(max_bytes=size)  # at the limit: nothing goes
    assert old.exists() and recent.exists()
    verdict_files.prune_cache(max_bytes=size - 1)
    assert not old.exists() and recent.exists()
    os.utime(recent, ns=(3, 3))
    vt.read_verdicts([files[1]], cache="read")  # a read-only reader touches nothing
    assert recent.stat().st_mtime_ns == 3


# ---------------------------------------------------------------- remembered hashes

@pytest.fixture
def settled(monkeypatch):
    """Files count as settled at once (else only files changed 2 s before a read are)."""
    monkeypatch.setattr(verdict_files, "RACY_NS", 0)


def no_read(monkeypatch):
    def refuse(*_):
        raise AssertionError("read a file whose hash is remembered")
    monkeypatch.setattr(verdict_files, "_read_into_buffer", refuse)


def test_an_unchanged_file_is_neither_read_nor_hashed_again(cache, files, settled, monkeypatch):
    first = vt.read_verdicts(files)
    assert all(verdict_files._stat_entry(p).is_file() for p in files)
    no_read(monkeypatch)
    again = vt.read_verdicts(files)
    assert_same_table(again, first)
    assert again.inputs == first.inputs == [verdict_files.file_record(p) for p in files]


def test_a_file_changed_just_before_it_was_hashed_is_hashed_again(cache, files):
    vt.read_verdicts(files)  # the files were written within RACY_NS of this read
    assert not any(verdict_files._stat_entry(p).exists() for p in files)


def test_a_change_that_keeps_size_and_mtime_is_seen(cache, files, settled):
    import os

    vt.read_verdicts(files)
    before = files[0].stat()
    text = files[0].read_text()
    same_size = text.replace('"verdict":"missing"', '"verdict":"invalid"', 1)
    assert len(same_size) == len(text) and same_size != text
    files[0].write_text(same_size)
    os.utime(files[0], ns=(before.st_atime_ns, before.st_mtime_ns))  # as `touch -r` would
    assert files[0].stat().st_size == before.st_size and files[0].stat().st_mtime_ns == before.st_mtime_ns
    assert_same_table(vt.read_verdicts(files), vt.read_verdicts_reference(files))


@pytest.mark.parametrize("kind", ["garbage", "not_an_object", "bad_hash", "other_stat", "pruned_entry"])
def test_an_unusable_remembered_hash_is_ignored(cache, files, settled, kind):
    vt.read_verdicts(files)
    known = verdict_files._stat_entry(files[0])
    doc = json.loads(known.read_text())
    if kind == "garbage":
        known.write_bytes(b"\xff{")
    elif kind == "not_an_object":
        known.write_text("[1, 2]")
    elif kind == "bad_hash":
        known.write_text(json.dumps({**doc, "sha256": "../../elsewhere"}))
    elif kind == "other_stat":
        known.write_text(json.dumps({**doc, "stat": {**doc["stat"], "ino": doc["stat"]["ino"] + 1}}))
    else:
        entry_of(files[0]).unlink()
    assert_same_table(vt.read_verdicts(files), vt.read_verdicts_reference(files))
    assert json.loads(known.read_text()) == doc  # hashed again and remembered anew


def test_read_only_readers_remember_nothing(cache, files, settled, monkeypatch):
    vt.read_verdicts(files, cache="read")
    assert not cache.exists()
    vt.read_verdicts(files)
    known = verdict_files._stat_entry(files[0])
    import os

    os.utime(known, ns=(5, 5))
    no_read(monkeypatch)
    vt.read_verdicts(files, cache="read")  # uses the remembered hashes, touches nothing
    assert known.stat().st_mtime_ns == 5
    with pytest.raises(AssertionError, match="read a file"):
        vt.read_verdicts(files, cache="off")


def test_past_their_number_the_least_recently_used_hashes_go(cache, files, settled, tmp_path):
    import os

    copies = [tmp_path / f"copy-{k}.jsonl" for k in range(5)]
    for path in copies:
        path.write_bytes(files[1].read_bytes())
    for path in copies:  # one at a time: together they would be duplicates
        vt.read_verdicts([path])
    known = [verdict_files._stat_entry(p) for p in copies]
    for k, entry in enumerate(known):
        os.utime(entry, ns=(k + 1, k + 1))  # copy-0 used longest ago
    vt.read_verdicts([copies[0]])  # a hit touches what it used: now the most recent
    verdict_files.prune_cache(max_hashes=5)  # at the limit: nothing goes
    assert all(entry.exists() for entry in known)
    verdict_files.prune_cache(max_hashes=4)  # past it: down to 80% (3)
    assert [entry.exists() for entry in known] == [True, False, False, True, True]


def test_only_a_regular_files_hash_is_remembered(cache, files, settled):
    import stat as st
    from types import SimpleNamespace

    real = files[0].stat()
    pipe = SimpleNamespace(**{k: getattr(real, k) for k in ("st_size", "st_mtime_ns", "st_ctime_ns", "st_ino", "st_dev")},
                           st_mode=st.S_IFIFO | 0o600)  # the same stat, but of a pipe
    later = real.st_ctime_ns + 10**12
    verdict_files._remember_hash(files[0], pipe, "0" * 64, later)
    assert not verdict_files._stat_entry(files[0]).exists()
    verdict_files._remember_hash(files[0], real, "0" * 64, later)
    assert verdict_files._stat_entry(files[0]).is_file()
