"""Human revision of rubrics: `export` to one YAML per question, `import` back, `diff`.

Export keeps each JSONL record exactly as written (the parquet's are dumped from the
validated question), so `import` of an unedited folder writes the same records, byte for
byte, in canonical JSON Lines. A record whose YAML was edited gets `provenance.revised_on`
(and `revised_by`, when given): the benchmark says which rubrics a human touched.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from gamut_local.data.dataset import load_question_rows
from gamut_local.data.records import Question
from gamut_local.errors import InputError, Problem
from gamut_local.rubric.revision import (
    diff_lines,
    diff_records,
    export_text,
    import_text,
    line_of,
    text_hash,
)
from gamut_local.rundir.store import JOURNAL, dumps, fsync_path, write_text_atomic

YAML_SUFFIXES = (".yaml", ".yml")


def _file_name(i: int, question_id: str) -> str:
    return f"{i:04d}-{re.sub(r'[^A-Za-z0-9._-]', '_', question_id)}.yaml"


def export_dataset(dataset: str | Path, out_dir: str | Path) -> list[Path]:
    """One commented YAML per question, numbered in dataset order; the folder must hold none yet."""
    dataset, out_dir = Path(dataset), Path(out_dir)
    rows = load_question_rows(dataset, check_images=False)
    if out_dir.is_dir() and any(p.suffix in YAML_SUFFIXES for p in out_dir.iterdir()):
        raise InputError([Problem(str(out_dir), None, "", "already holds YAML files; export into a new folder "
                                  "(import reads every YAML file there)")])
    names = [out_dir / _file_name(i, q.question_id) for i, (q, _, _) in enumerate(rows, start=1)]
    return write_files(out_dir, ((name, export_text(rec, q, dataset.name).encode("utf-8"))
                                 for name, (q, _, rec) in zip(names, rows)))


def _write_temp(folder: Path, name: str, data: bytes) -> Path:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
    except BaseException:
        os.unlink(tmp)
        raise
    return Path(tmp)


SYNCFS_FROM = 100  # from this many files, one syncfs of their file system instead of an fsync each


def _syncfs_works() -> bool:
    """Linux from 5.8, where syncfs reports a failed write-back (before, it said 0 regardless)."""
    if sys.platform != "linux":
        return False
    release = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return release is not None and (int(release[1]), int(release[2])) >= (5, 8)


def syncfs(folder: Path) -> bool:
    """Everything written to `folder`'s file system on disk, in one call: 10,000 files took
    ~4 CPU-s of fsyncs (a journal commit each) and one syncfs 2 ms. False where there is no
    such call (then fsync each file)."""
    if not _syncfs_works():
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        if libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(folder))
    finally:
        os.close(fd)
    return True


def write_files(folder: Path, files) -> list[Path]:
    """Write new files, (path in `folder`, bytes) pairs, so that each appears whole or not at
    all and, once this returns, all of them are on disk; after a failure none of them is there.

    Into a folder that does not exist yet (what `export` asks for), the files are written
    under their own names in a temporary folder beside it, which is renamed into place once
    they are on disk: one rename, not one per file (10,000 temporary files and their renames
    took 1.5 s longer). Into a folder that exists, each file goes through a temporary file of
    its own (`_write_each`)."""
    if folder.exists() or folder.is_symlink():
        return _write_each(folder, files)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{folder.name}.{secrets.token_hex(8)}.tmp"
    staging.mkdir()  # as `mkdir` makes the folder itself (mode, owner); never one that exists
    try:
        names = _write_all(staging, files)
        _on_disk(staging, [staging / n for n in names])
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for d in (folder, folder.parent):
        fsync_path(d)
    written = [folder / n for n in names]
    JOURNAL.replaced.extend(map(str, written))
    return written


def _write_new(folder: Path, name: str, data: bytes) -> str:
    fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.fchmod(fd, 0o644)  # whatever the umask, as `_write_temp` makes them
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(data)
    finally:
        os.close(fd)
    return name


def _write_all(staging: Path, files) -> list[str]:
    """Every file into the (private) `staging` folder, by a pool of threads while `files`
    makes the next ones (creating a file is kernel time, about as long as rendering it: the
    two overlap on two cores)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        pending = [pool.submit(_write_new, staging, path.name, data) for path, data in files]
    return [f.result() for f in pending]


def _on_disk(folder: Path, paths: list[Path]) -> None:
    """`paths`, new files of `folder`, on disk: by one `syncfs` from SYNCFS_FROM files, else
    (or without it) fsynced together from a pool of threads (the file system commits
    concurrent fsyncs as one: 2,000 files took 0.5 s so, and 10 s one after another)."""
    if len(paths) < SYNCFS_FROM or not syncfs(folder):
        with ThreadPoolExecutor(max_workers=min(32, len(paths) or 1)) as pool:
            list(pool.map(fsync_path, paths))
        fsync_path(folder)


def _write_each(folder: Path, files) -> list[Path]:
    """`write_files` into a folder that exists: each file to a temporary file first (written
    by a pool of threads while `files` makes the next ones), all put on disk (`_on_disk`),
    then renamed into place, and the folder fsynced once so that the renames last too."""
    pending: dict[Path, Future] = {}
    temps: dict[Path, Path] = {}
    written: list[Path] = []
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            try:
                for path, data in files:
                    pending[path] = pool.submit(_write_temp, folder, path.name, data)
            finally:  # on a failure too: every temporary written is known, to be removed
                wait(pending.values())
        temps = {path: f.result() for path, f in pending.items()}
        _on_disk(folder, list(temps.values()))
        for path, tmp in temps.items():
            os.replace(tmp, path)
            written.append(path)
        fsync_path(folder)
    except BaseException:
        made = [f.result() for f in pending.values() if f.done() and not f.cancelled() and f.exception() is None]
        for tmp in [*made, *written]:
            tmp.unlink(missing_ok=True)
        raise
    JOURNAL.replaced.extend(map(str, written))
    return written


def _read_one(path: Path, problems: list[Problem]) -> tuple[str, str, dict | None] | None:
    """(question id, the record as its JSON line, the record if it was edited) for one YAML
    file, or None with its problems added. The line is what `import` writes and what the
    header's hash is of."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        problems.append(Problem(str(path), None, "", f"not valid UTF-8 (byte {e.start})"))
        return None
    rec, source_hash, node, found = import_text(text, str(path))
    problems.extend(found)
    if rec is None:
        return None
    try:
        Question.model_validate(rec)
    except ValidationError as e:
        for err in e.errors():
            loc = tuple(p for p in err["loc"] if not str(p).startswith("function-"))
            problems.append(Problem(str(path), line_of(node, loc), ".".join(map(str, loc)), err["msg"]))
        return None
    line = dumps(rec)
    return rec["question_id"], line, None if text_hash(line) == source_hash else rec


def import_dir(folder: str | Path, out: str | Path, *, revised_by: str | None = None,
               revised_on: str | None = None) -> dict:
    """Validate every YAML of a folder and write them, in file-name order, as one JSONL."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError([Problem(str(folder), None, "", "not a folder")])
    files = sorted(p for p in folder.iterdir() if p.suffix in YAML_SUFFIXES)
    if not files:
        raise InputError([Problem(str(folder), None, "", "no .yaml files")])
    problems: list[Problem] = []
    lines, revised, seen = [], [], {}
    today = revised_on or datetime.now(UTC).date().isoformat()
    for path in files:
        got = _read_one(path, problems)
        if got is None:
            continue
        qid, line, edited = got
        if qid in seen:
            problems.append(Problem(str(path), None, "question_id", f"duplicate id {qid!r} (also in {seen[qid]})"))
            continue
        seen[qid] = path.name
        if edited is not None:
            stamp = {"revised_on": today, **({"revised_by": revised_by} if revised_by else {})}
            line = dumps({**edited, "provenance": {**(edited.get("provenance") or {}), **stamp}})
            revised.append(qid)
        lines.append(line + "\n")
    if problems:
        raise InputError(problems)
    write_text_atomic(out, "".join(lines))
    return {"questions": len(lines), "revised": revised, "out": str(out)}


def diff_files(a: str | Path, b: str | Path) -> tuple[dict, list[str]]:
    """`diff_records` of two dataset files, and its lines."""
    qa, ra, qb, rb = {}, {}, {}, {}
    for questions, records, path in ((qa, ra, a), (qb, rb, b)):
        for q, _, rec in load_question_rows(path, check_images=False):
            questions[q.question_id], records[q.question_id] = q, rec
    d = diff_records(qa, qb, ra, rb)
    return d, diff_lines(d)
