"""The viewer's columns, kept between starts so reopening a large run is quick.

Stored under `rundir.store.cache_dir("view")` (`~/.cache/gamut-local/view/`), never in the run
directory, one folder per run; valid while every input it was built from (the dataset and each
model judge's verdict file) has the same path, size and modification time, as git's index and
`data.verdict_files.current_record` judge a file unchanged. Human verdicts are not cached (they
change while the app runs and are small). `--read-only` reads a cache but never writes one.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np

from gamut_local.rundir import store

VERSION = 2  # 2: stale verdicts left out, the notes saying so kept
_ARRAYS = ("q", "s", "c", "j", "code", "tier", "probs")


def cache_dir(run_dir: Path) -> Path:
    return store.cache_dir("view") / hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:20]


def inputs_key(files: list[Path], extra: str = "") -> list[list]:
    """Each input's (path, size, mtime), and `extra` (settings the columns depend on)."""
    out = [[extra]]
    for p in files:
        st = Path(p).stat()
        out.append([str(Path(p).resolve()), st.st_size, st.st_mtime_ns])
    return out


def load(run_dir: Path, key: list) -> tuple[dict, list[str], list[str]] | None:
    """The cached columns (the fields of `index.Verdicts`), question ids and notes if they were
    built from exactly these inputs, else None."""
    folder = cache_dir(run_dir)
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("version") != VERSION or meta.get("inputs") != key:
            return None
        with np.load(folder / "columns.npz") as z:
            arrays = {name: z[name] for name in _ARRAYS}
    except (OSError, ValueError, KeyError):
        return None  # absent, unreadable or half-written: read the files instead
    columns = {"judges": meta["judges"], "systems": [tuple(s) for s in meta["systems"]],
               "checks": meta["checks"], **arrays}
    return columns, meta["question_ids"], meta.get("notes", [])


def save(run_dir: Path, key: list, v, question_ids: list[str], notes: list[str] = ()) -> None:
    """Write the cache (columns first, then the meta that validates them); failures are ignored:
    a cache is never worth an error."""
    folder = cache_dir(run_dir)
    try:
        (folder / "meta.json").unlink(missing_ok=True)  # no moment where old meta vouches for new columns
        columns = io.BytesIO()
        np.savez(columns, **{name: getattr(v, name) for name in _ARRAYS})
        store.write_bytes_atomic(folder / "columns.npz", columns.getvalue(), durable=False)
        meta = {"version": VERSION, "run_dir": str(Path(run_dir).resolve()), "inputs": key,
                "judges": v.judges, "systems": [list(s) for s in v.systems], "checks": v.checks,
                "question_ids": question_ids, "notes": list(notes)}
        store.write_bytes_atomic(folder / "meta.json", json.dumps(meta).encode("utf-8"), durable=False)
    except OSError:
        pass

