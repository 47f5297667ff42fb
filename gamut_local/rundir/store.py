"""Files between stages: JSON Lines read with precise errors, chunked atomic appends, resume.

A killed job loses at most the chunk in flight: each chunk is one `write` of whole lines
followed by fsync (cut back to its old size if the disk fills mid-chunk). A torn last line
(no newline and not valid JSON: a kill landed mid-write) is handled the same way by every
reader: skipped with a notice; the file's owner cuts it off before its next append.

Whole files (scores, agreement, report, manifest, compiled rubrics, exported YAML) are
written by `atomic_file` alone: a temporary file in the same folder, fsynced, renamed, the
folder fsynced, so a reader sees the old file or the new one, never half of one; a failure
leaves no temporary file behind. A folder of new files (`export`) is written whole beside its
place and renamed into it (`write_folder_atomic`).

`JOURNAL` records what this process wrote and the notices readers raised, so the CLI can say
exactly what was and was not written when a command fails.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

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


@contextmanager
def atomic_file(path: str | Path, *, journal: bool = True) -> Iterator[BinaryIO]:
    """The one way a whole file is written: a temporary file in the same folder, given to the
    caller to write; then fsync, rename over `path`, fsync the folder. Readers see the old file
    or the new one, never half of one, and once this returns the new one survives a crash; a
    failure (disk full, interrupt) leaves the old file and no temporary one. `journal` False:
    the caller says in `JOURNAL` what the write means (a verdict part is lines added to its
    unit, not a file of its own)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(path))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_path(path.parent)
    if journal:
        JOURNAL.replaced.append(str(path))


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """`data` as the whole of `path` (`atomic_file`)."""
    with atomic_file(path) as f:
        _write_all(f.fileno(), data, Path(path))


def write_folder_atomic(folder: str | Path, files: Iterable[tuple[str, bytes]]) -> list[Path]:
    """New files, (name, bytes) pairs, in `folder`, all of them or none: each written under
    its name in a temporary folder beside `folder` and all put on disk by one `os.sync()`;
    then that folder renamed to `folder` where it does not exist yet, or each file renamed
    into it; then the folders fsynced, so that the names last too. A name `folder` holds
    already is an error, before anything is renamed.

    One sync rather than an fsync per file: `export` writes a file per question, and 10,000
    fsyncs one after another took 4-16 s on a 2-core VM (a journal commit each), one sync
    about 2 s. sync(2) reports no write-back error; a file the disk failed to write is
    refused by `import` as not a question record."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{folder.name}.{secrets.token_hex(8)}.tmp"
    staging.mkdir()  # as `mkdir` makes the folder itself (mode, owner); never one that exists
    moved: list[Path] = []
    try:
        names = [_write_new(staging / name, data) for name, data in files]
        os.sync()
        if folder.exists() or folder.is_symlink():
            taken = [n for n in names if (folder / n).exists()]
            if taken:
                raise FileExistsError(17, "File exists", str(folder / taken[0]))
            for n in names:
                os.replace(staging / n, folder / n)
                moved.append(folder / n)
            staging.rmdir()
        else:
            os.replace(staging, folder)
    except BaseException:
        for p in moved:
            p.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for d in (folder, folder.parent):
        fsync_path(d)
    written = [folder / n for n in names]
    JOURNAL.replaced.extend(map(str, written))
    return written


def _write_new(path: Path, data: bytes) -> str:
    """A new file; its name."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.fchmod(fd, 0o644)  # whatever the umask, as `atomic_file` makes them
        _write_all(fd, data, path)
    finally:
        os.close(fd)
    return path.name


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
