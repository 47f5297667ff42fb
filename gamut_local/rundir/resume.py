"""Resume: which results are already on disk, and the hashes that say under which settings.

Every answer carries its model's settings hash and every verdict its judge's (judge settings,
prompt template, `sees_image`) plus the hash of the response it graded, so a rerun skips
exactly what was done under the same settings and refuses to mix in results of others.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from gamut_local.config import JudgeSpec
from gamut_local.errors import InputError, Problem
from gamut_local.prompts.judge import JUDGE_TEMPLATE_HASH
from gamut_local.rundir.store import read_jsonl, repair_tail


def judge_settings_hash(spec: JudgeSpec) -> str:
    """What determines a verdict besides the answer and the check."""
    parts = (spec.settings_hash(), JUDGE_TEMPLATE_HASH, f"sees_image={spec.sees_image}")
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]


def answer_hash(response: str) -> str:
    return hashlib.sha256(response.encode("utf-8")).hexdigest()[:12]


def done_keys_checked(paths: list[Path], key, expected: dict, what: str,
                      own: Path | None = None) -> set[tuple]:
    """Keys already on disk, for resume, refusing records made under other settings.

    `paths` are every file holding such results (all shards); `own` is the one this process
    appends to: only its torn tail (left by a kill) is cut off.
    `expected` maps a record field (e.g. `settings_hash`) to the value it must have: either
    one value for all records, or a function of the record (e.g. the hash of the answer a
    verdict graded; None: nothing to compare). A mismatch means the file holds results of a
    different configuration; appending would mix them, so it is an error naming the file.
    """
    if own is not None:
        repair_tail(own)
    done, problems = set(), []
    for path in (p for p in paths if p.exists()):
        # The same torn-tail rule as every reader (store.read_jsonl): another shard's task may
        # be appending right now, or was killed mid-write; its unfinished last line is not done
        # and not ours to repair. A whole record lacking only its newline is done, as score
        # and report count it, so no reader ever disagrees about what exists.
        for no, rec in read_jsonl(path, allow_empty=True):
            try:
                k = key(rec)
            except KeyError as e:
                problems.append(Problem(str(path), no, str(e.args[0]), f"missing in this {what} record"))
                continue
            for field, want in expected.items():
                want = want(rec) if callable(want) else want
                if want is not None and rec.get(field) != want:
                    problems.append(Problem(
                        str(path), no, field,
                        f"{rec.get(field)!r} differs from the current {want!r}: this {what} was made "
                        f"under other settings; move the file aside or use another output_dir"))
            if k in done:
                problems.append(Problem(str(path), no, "", f"duplicate {what} key {k}"))
            done.add(k)
        if len(problems) > 20:
            break
    if problems:
        raise InputError(problems[:20])
    return done
