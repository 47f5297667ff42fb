"""The verdict store: parts written atomically, compaction crash-safe, the schema versioned.
The kills are real: a child process SIGKILLs itself at the named moment."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gamut_local.errors import InputError
from gamut_local.rundir import verdict_store as vs


def verdict(q: str, check: str = "c1", **extra) -> dict:
    return {"question_id": q, "model": "m", "variant": "text_only", "judge": "j", "check_id": check,
            "tier": "valuable", "verdict": "meets", "raw": "meets", "probs": {"meets": 0.75, "missing": 0.25},
            "method": "logprobs", "prompt_tokens": 120, "num_cached_tokens": 100, "attempts": 1,
            "settings_hash": "s" * 16, "check_hash": "c" * 16, "answer_hash": "a" * 16, **extra}


def keys(unit) -> list[tuple]:
    t = vs.read_unit(unit, ["question_id", "check_id"])
    return sorted(zip(t.column("question_id").to_pylist(), t.column("check_id").to_pylist()))


def test_records_round_trip_with_every_identity_field_and_extras(tmp_path):
    unit = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    recs = [verdict("q1"), verdict("q2", probs=None, method=None, attempts=2, note={"by": "x"})]
    vs.write_part(unit, recs)
    got = vs.to_records(vs.read_unit(unit))
    assert got == recs
    t = pq.read_table(vs.unit_files(unit)[0])
    assert pa.types.is_dictionary(t.schema.field("settings_hash").type)
    assert t.column("p_meets").to_pylist() == [0.75, None] and t.column("p_contradicts").to_pylist() == [None, None]


def test_the_writer_refuses_a_bad_record_naming_it(tmp_path):
    unit = tmp_path / "m.text_only.parquet"
    with pytest.raises(InputError) as e:
        vs.write_part(unit, [verdict("q1"), verdict("q2", tier="vital"), verdict("q3", probs={"meets": "x"})])
    text = str(e.value)
    assert f"{unit}:2: tier" in text and f"{unit}:3: probs" in text
    assert not vs.unit_files(unit)


def test_compaction_folds_parts_into_one_file_and_drops_rows_on_request(tmp_path):
    unit = tmp_path / "m.text_only.parquet"
    for k in range(3):
        vs.write_part(unit, [verdict(f"q{k}", c) for c in ("c1", "c2")])
    assert len(vs.unit_files(unit)) == 3
    assert vs.compact(unit) == 6
    assert vs.unit_files(unit) == [unit] and not vs.parts_dir(unit).exists()
    vs.write_part(unit, [verdict("q9")])  # a rerun adds parts after the compacted file
    assert len(keys(unit)) == 7
    vs.compact(unit, keep=lambda t: [q != "q0" for q in t.column("question_id").to_pylist()])
    assert keys(unit) == sorted([(f"q{k}", c) for k in (1, 2) for c in ("c1", "c2")] + [("q9", "c1")])


def test_another_schema_version_is_refused(tmp_path):
    unit = tmp_path / "m.text_only.parquet"
    table = vs.to_table([verdict("q1")])
    pq.write_table(table.replace_schema_metadata({vs.META_KEY: json.dumps({"schema_version": 99})}), unit)
    with pytest.raises(InputError) as e:
        vs.read_unit(unit)
    assert f"{unit}: schema_version" in str(e.value) and "99" in str(e.value)


def _killed(tmp_path, unit, when: str, action: str) -> None:
    """Run `action` on the unit in a child that SIGKILLs itself at `when`."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        from pathlib import Path
        from gamut_local.rundir import verdict_store as vs
        sys.path.insert(0, {str(tmp_path)!r})
        def die(*a, **k):
            os.kill(os.getpid(), signal.SIGKILL)
        if {when!r} == "before rename":
            os.replace = die  # the rename `store.atomic_file` makes
        else:
            vs._remove_parts = die
        unit = Path({str(unit)!r})
        rec = {verdict("q-killed")!r}
        {action}
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == -signal.SIGKILL, res.stderr


def test_a_kill_mid_part_leaves_no_torn_file_and_loses_only_that_chunk(tmp_path):
    unit = tmp_path / "m.text_only.parquet"
    vs.write_part(unit, [verdict("q1")])
    _killed(tmp_path, unit, "before rename", "vs.write_part(unit, [rec])")
    assert list(vs.parts_dir(unit).glob(".*.tmp")), "the kill landed after the temporary file was written"
    assert keys(unit) == [("q1", "c1")]  # the chunk in flight is lost, nothing else, nothing torn
    vs.write_part(unit, [verdict("q2")])  # the next write clears the leftover
    assert not list(vs.parts_dir(unit).glob(".*.tmp")) and keys(unit) == [("q1", "c1"), ("q2", "c1")]


@pytest.mark.parametrize("when", ["before rename", "before the parts are deleted"])
def test_a_kill_mid_compaction_loses_nothing_and_counts_nothing_twice(tmp_path, when):
    unit = tmp_path / "m.text_only.parquet"
    vs.write_part(unit, [verdict("q1")])
    vs.compact(unit)
    vs.write_part(unit, [verdict("q2")])
    vs.write_part(unit, [verdict("q3")])
    want = [("q1", "c1"), ("q2", "c1"), ("q3", "c1")]
    _killed(tmp_path, unit, when, "vs.compact(unit)")
    assert keys(unit) == want
    if when == "before the parts are deleted":  # the new file holds them; readers skip them
        assert len(list(vs.parts_dir(unit).glob("part-*.parquet"))) == 2 and vs.unit_files(unit) == [unit]
    vs.write_part(unit, [verdict("q4")])  # numbered after what the compacted file holds
    vs.compact(unit)
    assert keys(unit) == want + [("q4", "c1")] and vs.unit_files(unit) == [unit]
    assert not vs.parts_dir(unit).exists()


def test_units_are_found_under_a_run_or_a_folder(tmp_path):
    a = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    b = tmp_path / "verdicts" / "k" / "m.multimodal.shard-0-of-2.parquet"
    vs.write_part(a, [verdict("q1")])
    vs.compact(a)
    vs.write_part(b, [verdict("q1", judge="k", variant="multimodal")])
    (tmp_path / "scores").mkdir()
    pq.write_table(pa.table({"x": [1]}), tmp_path / "scores" / "scores.responses.parquet")
    assert vs.units_in(tmp_path) == [a, b]
    assert vs.units_in(tmp_path / "verdicts" / "k") == [b]


def test_retiring_stale_verdicts_interrupted_midway_loses_nothing(tmp_path, monkeypatch):
    """Resume moves stale verdicts to superseded/ first, then rewrites its own unit: stopped in
    between, the rerun moves them again (a repeat in the history), never a loss."""
    from gamut_local.rundir import resume

    own = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    superseded = tmp_path / "superseded" / "verdicts" / "j" / "m.text_only.parquet"
    vs.write_part(own, [verdict("q1"), verdict("q2", check_hash="old")])

    def scan():
        return resume.scan_done([own], lambda r: (r["question_id"], r["check_id"]),
                                lambda r: {"check_hash": "c" * 16}, "verdict", own=own)

    done, stale = scan()
    assert done == {("q1", "c1")} and [s.record["question_id"] for s in stale] == ["q2"]
    real = vs.compact

    def interrupted(unit, keep=None):
        if unit == own and keep is not None:
            raise KeyboardInterrupt
        return real(unit, keep)

    monkeypatch.setattr(vs, "compact", interrupted)
    with pytest.raises(KeyboardInterrupt):
        resume.retire_stale(stale, own, superseded, "verdict")
    assert keys(own) == [("q1", "c1"), ("q2", "c1")] and keys(superseded) == [("q2", "c1")]
    monkeypatch.setattr(vs, "compact", real)
    done, stale = scan()
    assert resume.retire_stale(stale, own, superseded, "verdict") == 1
    assert keys(own) == [("q1", "c1")] and keys(superseded) == [("q2", "c1"), ("q2", "c1")]
    assert scan() == ({("q1", "c1")}, [])


def test_two_writers_of_one_unit_lose_nothing(tmp_path):
    """A task owns its unit, but `verdicts import` may write into one while its judge task
    runs. Parts are numbered from what is there and a writer clears stray temporary files, so
    two unsynchronised writers could take one number (one part silently replaced) or delete
    each other's part in flight, and a compaction could fold an older set over a newer one.
    Writers of a unit take turns (`verdict_store`'s lock), so every verdict of both survives."""
    unit = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from gamut_local.rundir import verdict_store as vs
        unit, who, rec = Path(sys.argv[1]), sys.argv[2], {verdict("q")!r}
        for i in range(30):
            vs.write_part(unit, [{{**rec, "question_id": f"{{who}}{{i:02d}}"}}])
            if i % 10 == 9:
                vs.compact(unit)
    """)
    writers = [subprocess.Popen([sys.executable, "-c", code, str(unit), who]) for who in "ab"]
    assert [w.wait(timeout=300) for w in writers] == [0, 0]
    vs.compact(unit)
    assert keys(unit) == sorted((f"{who}{i:02d}", "c1") for who in "ab" for i in range(30))


def test_a_unit_replaced_whole_waits_for_its_writer(tmp_path):
    """`jury` and `verdicts export` replace a unit whole. A compaction in flight would put its
    older file over the replacement, so the replacement takes its turn: while another writer
    holds the unit, it writes nothing; once that writer is done, it writes."""
    unit = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    vs.write_part(unit, [verdict("q1")])
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from gamut_local.rundir import verdict_store as vs
        print("ready", flush=True)
        vs.replace_unit(Path(sys.argv[1]), [{verdict("q2")!r}])
    """)
    with vs._one_writer(unit):
        child = subprocess.Popen([sys.executable, "-c", code, str(unit)], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "ready\n"
        with pytest.raises(subprocess.TimeoutExpired):  # a replacement needs ~0.05 s: it is waiting
            child.wait(timeout=1.0)
        assert not unit.exists() and keys(unit) == [("q1", "c1")]
    assert child.wait(timeout=120) == 0
    assert keys(unit) == [("q2", "c1")] and vs.unit_files(unit) == [unit]


def _compacting_once(monkeypatch, name: str, unit, keep_parts: bool):
    """`vs.<name>` compacting the unit before its first call: a task finishing while a reader
    reads what it listed just before. `keep_parts`: the parts still there, as in the moment
    between the compacted file's rename and the parts' deletion."""
    real, done = getattr(vs, name), []

    def racing(*args, **kwargs):
        if not done and args[1:2] != ([],):  # a read of rows, not of a compacted file's metadata
            done.append(True)
            saved = {p: p.read_bytes() for p in vs.parts_dir(unit).glob("part-*.parquet")}
            vs.compact(unit)
            for p, data in saved.items() if keep_parts else ():
                p.write_bytes(data)
        return real(*args, **kwargs)

    monkeypatch.setattr(vs, name, racing)
    return done


@pytest.mark.parametrize("keep_parts", [False, True], ids=["parts-deleted", "parts-not-yet-deleted"])
def test_a_reader_racing_a_compaction_reads_one_state_of_the_unit(tmp_path, monkeypatch, keep_parts):
    """A reader lists a unit (its compacted file, then the parts it does not hold) and reads
    the files. A task compacting the unit in between once failed the read (a part gone) or
    counted the parts twice: `score` beside a running judge reported duplicate verdicts that
    were not there. The reader now sees the listing went stale and lists again."""
    from gamut_local.data.verdict_table import read_verdicts

    unit = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    vs.write_part(unit, [verdict("q1")])
    vs.compact(unit)
    vs.write_part(unit, [verdict("q2")])
    vs.write_part(unit, [verdict("q3")])
    want = [("q1", "c1"), ("q2", "c1"), ("q3", "c1")]
    done = _compacting_once(monkeypatch, "read_file", unit, keep_parts)
    table = read_verdicts([tmp_path / "verdicts"])
    assert done and sorted(zip((table.questions[q] for q in table.question), (table.checks[c] for c in table.check))) == want
    assert [f["path"] for f in table.inputs] == [str(unit)]  # the files of the state it read
    vs.write_part(unit, [verdict("q4")])
    done = _compacting_once(monkeypatch, "read_file", unit, keep_parts)
    assert keys(unit) == want + [("q4", "c1")] and done


def test_a_unit_that_never_holds_still_is_refused_by_name(tmp_path, monkeypatch):
    from gamut_local.data.verdict_table import read_verdicts

    unit = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    vs.write_part(unit, [verdict("q1")])
    monkeypatch.setattr(vs, "went_stale", lambda files, tables: True)
    for read in (lambda: read_verdicts([unit]), lambda: vs.read_unit(unit)):
        with pytest.raises(InputError) as e:
            read()
        assert str(e.value) == f"{unit}: <record>: kept being compacted while it was read ({vs.READ_TRIES} tries): read it again"


def test_parts_past_999999_are_read_and_numbered_on(tmp_path):
    """Part names have six digits; the millionth part has seven. The listing once matched six
    only: that part was never read, and the next write took its number again, replacing it."""
    unit = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    first = vs.write_part(unit, [verdict("q1")])
    first.rename(first.with_name("part-999999.parquet"))
    assert vs.write_part(unit, [verdict("q2")]).name == "part-1000000.parquet"
    assert vs.write_part(unit, [verdict("q3")]).name == "part-1000001.parquet"
    assert keys(unit) == [("q1", "c1"), ("q2", "c1"), ("q3", "c1")]
    vs.compact(unit)
    assert keys(unit) == [("q1", "c1"), ("q2", "c1"), ("q3", "c1")] and vs.unit_files(unit) == [unit]


def test_a_part_is_journaled_as_lines_of_its_unit_not_as_a_file(tmp_path):
    from gamut_local.rundir.store import JOURNAL

    unit = tmp_path / "m.text_only.parquet"
    JOURNAL.reset()
    try:
        vs.write_part(unit, [verdict("q1"), verdict("q2")])
        assert JOURNAL.summary() == f"wrote {unit} (+2 lines); nothing else was changed"
    finally:
        JOURNAL.reset()
