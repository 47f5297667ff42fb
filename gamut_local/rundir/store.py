"""Files between stages: JSON Lines read with precise errors, chunked atomic appends, resume.

A killed job loses at most the chunk in flight: each chunk is one `write` of whole lines
followed by fsync (cut back to its old size if the disk fills mid-chunk). A torn last line
(no newline and not valid JSON: a kill landed mid-write) is handled the same way by every
reader: skipped with a notice; the file's owner cuts it off before its next append.

Whole files (scores, agreement, report, manifest, compiled rubrics) are written to a
temporary file in the same folder, fsynced and renamed, so a reader sees the old file or the
new one, never half of one; a failure leaves no temporary file behind.

`JOURNAL` records what this process wrote and the notices readers raised, so the CLI can say
exactly what was and was not written when a command fails.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gamut_local.errors import InputError, Problem


@dataclass
class Journal:
    appended: dict[str, int] = field(default_factory=dict)  # path -> lines appended
    replaced: list[str] = field(default_factory=list)  # whole files written, in order
    notices: list[str] = field(default_factory=list)  # e.g. a torn last line that was skipped

    def reset(self) -> None:
        self.appended.clear()
        self.replaced.clear()
        self.notices.clear()

    def summary(self) -> str:
        """What this process wrote, as one sentence for an error message."""
        parts = [f"{p} (+{n} lines)" for p, n in self.appended.items()]
        parts += list(dict.fromkeys(self.replaced))
        if not parts:
            return "nothing was written"
        shown = ", ".join(parts[:6]) + (f" and {len(parts) - 6} more" if len(parts) > 6 else "")
        return f"wrote {shown}; nothing else was changed"


JOURNAL = Journal()


class _RepeatedKey(ValueError):
    pass


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _RepeatedKey(key)
    return obj


def parse_line(text: str) -> Any:
    """One JSON value; a key repeated in an object is an error (JSON would keep the last)."""
    return json.loads(text, object_pairs_hook=_no_repeats)


# An escape in U+D800-U+DFFF: a surrogate, which is text only as the half of a pair.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _lone_surrogate(text: str, value: Any) -> bool:
    """`\\ud800` alone parses to a string no file can hold (writing it raises
    UnicodeEncodeError later, far from the input); pairs are fine. Only a text with such an
    escape is checked, so records without one cost one regex scan."""
    if not _SURROGATE_ESCAPE.search(text):
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_json_text(text: str) -> tuple[Any, str | None]:
    """(value, None), or (None, why) for text that is not one strict JSON value: not JSON, a
    key repeated, nested too deeply, or a lone surrogate. Every JSON reader of user input
    (record files, the viewer's request bodies) goes through here."""
    try:
        value = parse_line(text)
    except json.JSONDecodeError as e:
        return None, f"not valid JSON: {e.msg} at column {e.colno}"
    except _RepeatedKey as e:
        return None, f"key {e.args[0]!r} appears twice in this object"
    except RecursionError:
        return None, "JSON nested too deeply"
    if _lone_surrogate(text, value):
        return None, "a string holds a lone surrogate (an escape such as \\ud800 without its pair), not text"
    return value, None


def _read_bytes(path: Path, problems: list[Problem]) -> bytes | None:
    name = str(path)
    try:
        if not path.is_file():
            why = "not a file" if path.exists() else "file not found"
            if path.is_symlink() and not path.exists():
                why = "a symbolic link that leads nowhere (broken, or a loop)"
            problems.append(Problem(name, None, "", why))
            return None
        return path.read_bytes()
    except OSError as e:
        problems.append(Problem(name, None, "", f"cannot read: {e.strerror or e}"))
        return None


def read_jsonl(path: str | Path, *, allow_empty: bool = False, problems: list[Problem] | None = None,
               whole_lines_only: bool = False, torn_tail_ok: bool = True) -> list[tuple[int, dict]]:
    """Every record of a JSONL file with its 1-based line number.

    Raises InputError listing every unreadable line (not UTF-8, not JSON, a repeated key,
    not an object), or a missing/empty file. Blank lines are allowed and skipped. Given a
    `problems` list, appends to it instead of raising, so a caller can report these beside
    its own findings.
    `torn_tail_ok`: a last line without its newline that is not valid JSON is a write cut
    short by a kill: skipped with a notice (False for hand-made files such as datasets,
    where it is a problem like any other).
    `whole_lines_only`: also ignore a last line without its newline that does parse, which
    another process may still be writing (a results file that a sibling job appends to).
    """
    collect = problems is not None
    problems = problems if collect else []
    path = Path(path)
    name = str(path)
    raw = _read_bytes(path, problems)
    if raw is None:
        if collect:
            return []
        raise InputError(problems)
    lines = raw.split(b"\n")
    unterminated = len(lines) if lines[-1].strip() else None
    records = []
    before = len(problems)
    for no, line in enumerate(lines, start=1):
        if not line.strip() or (whole_lines_only and no == unterminated):
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            text, bad = None, f"not valid UTF-8 (byte {e.start})"
        else:
            obj, bad = parse_json_text(text)
        if bad and no == unterminated and torn_tail_ok:
            JOURNAL.notices.append(f"{name}:{no}: torn last line (a write cut short) ignored; "
                                   "the stage that owns this file redoes it on its next run")
            continue
        if bad:
            problems.append(Problem(name, no, "", bad))
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(name, no, "", f"expected a JSON object, got {type(obj).__name__}"))
            continue
        records.append((no, obj))
    if not records and not allow_empty and len(problems) == before:
        problems.append(Problem(name, None, "", "file is empty: no records"))
    if problems and not collect:
        raise InputError(problems)
    return records


def dumps(record: dict) -> str:
    # sort_keys + fixed separators: same record, same bytes (compile output is byte-stable).
    return json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def repair_tail(path: Path) -> None:
    """Cut a torn last line left by a job killed mid-write (only the file's owner calls this)."""
    if not path.exists():
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


def _write_all(fd: int, payload: bytes, path: Path) -> None:
    view = memoryview(payload)
    try:
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError as e:  # os.write names no file: say which one the disk refused
        raise OSError(e.errno, e.strerror, str(path)) from None


def append_jsonl(path: str | Path, records: Iterable[dict]) -> int:
    """Append a chunk of records in one write + fsync. Returns how many were written.

    If the write fails part way (disk full), the file is cut back to its size before the
    chunk, so it never ends in half a record.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    repair_tail(path)
    payload = "".join(dumps(r) + "\n" for r in records).encode("utf-8")
    if not payload:
        return 0
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            _write_all(fd, payload, path)
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)
    n = payload.count(b"\n")
    JOURNAL.appended[str(path)] = JOURNAL.appended.get(str(path), 0) + n
    return n


def write_bytes_atomic(path: str | Path, data: bytes, *, durable: bool = True) -> None:
    """Write via a temporary file in the same folder, fsync, rename: readers never see half
    a file, and a failure (disk full, interrupt) leaves the old file and no temporary one.
    `durable=False` (a cache entry, which checks itself when read): no fsync, and not in the
    JOURNAL of what this command wrote."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(path))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            _write_all(fd, data, path)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        JOURNAL.replaced.append(str(path))


def fsync_path(path: str | Path) -> None:
    """fsync a file or a folder by path (a folder: so the renames into it survive a crash)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


def write_jsonl(path: str | Path, records: Iterable[dict]) -> None:
    write_text_atomic(path, "".join(dumps(r) + "\n" for r in records))
