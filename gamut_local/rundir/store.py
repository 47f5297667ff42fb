"""Files between stages: JSON Lines read with precise errors, chunked atomic appends, resume.

A killed job loses at most the chunk in flight: each chunk is one `write` of whole lines
followed by fsync, and a torn last line (the kill landed mid-write) is cut off before the
next append.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from gamut_local.errors import InputError, Problem


def read_jsonl(path: str | Path, *, allow_empty: bool = False, problems: list[Problem] | None = None,
               whole_lines_only: bool = False) -> list[tuple[int, dict]]:
    """Every record of a JSONL file with its 1-based line number.

    Raises InputError listing every unreadable line (not UTF-8, not JSON, not an object),
    or a missing/empty file. Blank lines are allowed and skipped. Given a `problems` list,
    appends to it instead of raising, so a caller can report these beside its own findings.
    `whole_lines_only`: ignore a last line without its newline, which another process may
    still be writing (a results file that a sibling job appends to).
    """
    collect = problems is not None
    problems = problems if collect else []
    path = Path(path)
    name = str(path)
    if not path.is_file():
        problems.append(Problem(name, None, "", "file not found" if not path.exists() else "not a file"))
        if collect:
            return []
        raise InputError(problems)
    raw = path.read_bytes()
    if whole_lines_only:
        raw = raw[: raw.rfind(b"\n") + 1]
    records = []
    before = len(problems)
    for no, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            problems.append(Problem(name, no, "", f"not valid UTF-8 (byte {e.start})"))
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            problems.append(Problem(name, no, "", f"not valid JSON: {e.msg} at column {e.colno}"))
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
    """Cut a torn last line left by a job killed mid-write."""
    if not path.exists():
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


def append_jsonl(path: str | Path, records: Iterable[dict]) -> int:
    """Append a chunk of records in one write + fsync. Returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    repair_tail(path)
    payload = "".join(dumps(r) + "\n" for r in records).encode("utf-8")
    if not payload:
        return 0
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, payload)
        os.fsync(fd)
    finally:
        os.close(fd)
    return payload.count(b"\n")


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write via a temporary file and rename, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


def write_jsonl(path: str | Path, records: Iterable[dict]) -> None:
    write_text_atomic(path, "".join(dumps(r) + "\n" for r in records))
