"""Resume: which results are already on disk and current, and what to do with stale ones.

Every answer and verdict carries identity hashes (`rundir.identity`). A rerun skips exactly the
records whose identity is current and redoes the others: a stale record is moved, not lost,
to the run's `superseded/` folder (`retire_stale`), then made again. Authoring logs (draft,
audit) keep the stricter rule: a record made under other settings stops the stage
(`done_keys_checked`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gamut_local.errors import InputError, Problem
from gamut_local.rundir import verdict_store
from gamut_local.rundir.identity import stale_fields
from gamut_local.rundir.store import append_jsonl, dumps, read_jsonl, repair_tail, write_text_atomic

MAX_PROBLEMS = 20


@dataclass
class Stale:
    """A record on disk whose identity is not current: where it is and which fields differ."""

    path: Path
    line: int
    record: dict
    fields: list[str]


def scan_done(paths: list[Path], key, current, what: str, own: Path | None = None) -> tuple[set[tuple], list[Stale]]:
    """Keys of current records on disk, and the stale records, for resume.

    `paths` are every file holding such results (all shards); `own` is the one this process
    appends to: only its torn tail (left by a kill) is cut off. `current(record)` gives the
    identity the record must have now ({field: value}; a None value is not compared).
    A key twice in the files is an error: appending would double count it.
    """
    if own is not None and verdict_store.is_store(own):
        verdict_store.compact(own)  # a killed task's parts: folded in, so row numbers are stable
    elif own is not None:
        repair_tail(own)
    done, stale, problems, seen = set(), [], [], {}
    for path in (p for p in paths if p.exists() or verdict_store.is_store(p)):
        # The same torn-tail rule as every reader (store.read_jsonl): another shard's task may
        # be appending right now, or was killed mid-write; its unfinished last line is not done
        # and not ours to repair. A whole record lacking only its newline is done, as score
        # and report count it, so no reader ever disagrees about what exists.
        rows = verdict_store.records(path) if verdict_store.is_store(path) else read_jsonl(path, allow_empty=True)
        for no, rec in rows:
            try:
                k = key(rec)
            except KeyError as e:
                problems.append(Problem(str(path), no, str(e.args[0]), f"missing in this {what} record"))
                continue
            if k in seen:
                problems.append(Problem(str(path), no, "", f"duplicate {what} key {k} (first at {seen[k]})"))
                continue
            seen[k] = f"{path}:{no}"
            differ = stale_fields(rec, current(rec))
            if differ:
                stale.append(Stale(path, no, rec, differ))
            else:
                done.add(k)
        if len(problems) > MAX_PROBLEMS:
            break
    if problems:
        raise InputError(problems[:MAX_PROBLEMS])
    return done, stale


def stale_summary(stale: list[Stale]) -> str:
    """'12 (check_hash 10, answer_hash 2)': how many, and on which fields ('check_hash absent':
    made before that hash existed)."""
    counts: dict[str, int] = {}
    for s in stale:
        for f in s.fields:
            f = f"{f} absent" if s.record.get(f) is None else f
            counts[f] = counts.get(f, 0) + 1
    return f"{len(stale)} ({', '.join(f'{f} {n}' for f, n in sorted(counts.items()))})"


def retire_stale(stale: list[Stale], own: Path, superseded: Path, what: str) -> int:
    """Move stale records out of `own` into `superseded` (appended: the history is kept).

    Crash-safe in this order: the records are appended to `superseded` first, then `own` is
    rewritten atomically without them; a kill in between leaves them in both, and the rerun
    moves them again (a repeat in the history, never a loss). Only `own` is rewritten: another
    file may belong to a shard task running now, so stale records there are an error naming it.
    """
    elsewhere = sorted({str(s.path) for s in stale if s.path != own})
    if elsewhere:
        raise InputError([Problem(p, None, "", f"holds stale {what} records of this task's questions but "
                                  "belongs to another shard layout; rerun this stage once without --shard "
                                  "(or with the shard count that wrote it) to redo them") for p in elsewhere])
    if not stale:
        return 0
    drop = {s.line for s in stale}
    if verdict_store.is_store(own):  # rows are numbered as `scan_done` read the compacted unit
        superseded = superseded.with_suffix(verdict_store.SUFFIX)
        verdict_store.write_part(superseded, [s.record for s in stale])
        verdict_store.compact(superseded)
        verdict_store.compact(own, keep=lambda t: [no not in drop for no in range(1, t.num_rows + 1)])
        return len(stale)
    append_jsonl(superseded, [s.record for s in stale])
    keep = [dumps(rec) + "\n" for no, rec in read_jsonl(own, allow_empty=True) if no not in drop]
    write_text_atomic(own, "".join(keep))
    return len(stale)


def done_keys_checked(paths: list[Path], key, expected: dict, what: str,
                      own: Path | None = None) -> set[tuple]:
    """Keys already on disk, refusing records made under other settings (authoring logs).

    `expected` maps a record field to the value it must have: one value for all records, or a
    function of the record (None: nothing to compare). A mismatch is an error naming the file:
    appending would mix configurations in one log.
    """
    def current(rec: dict) -> dict:
        return {f: (want(rec) if callable(want) else want) for f, want in expected.items()}

    done, stale = scan_done(paths, key, current, what, own)
    if stale:
        raise InputError([Problem(
            str(s.path), s.line, s.fields[0],
            f"{s.record.get(s.fields[0])!r} differs from the current {current(s.record)[s.fields[0]]!r}: this "
            f"{what} was made under other settings; move the file aside or use another output_dir")
            for s in stale[:MAX_PROBLEMS]])
    return done
