"""Whether a run's report is current: `report.stamp.json`, next to report.md, records what the
last report was made from, so a report with nothing new to say is the files already there.

The stamp holds the command's settings (dataset, seed, flags, the directory relative paths
were resolved from), the code (a hash of every file of the `gamut_local` package and the
Python version), and the stat (size, mtime, inode) of every file the report could have read
(every file of the run directory but the report's own outputs, plus the files outside it that
it read: the dataset, extra verdicts and answers) taken *before* reading them, and of every
output (report.md, figures/, tables/, scores/) after writing them. The report is current only
while all of these are exactly so: a file added, removed, touched or rewritten, on either
side, another setting or another version of the code makes it fresh. An input changed within
`RACY_NS` before it was recorded could change again within the same mtime tick unseen (git's
"racily clean" case): then no stamp is written. Nothing here imports numpy or pydantic:
`gamut-local report` on a current run is this check and Python's start-up.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

STAMP = "report.stamp.json"
STAMP_VERSION = 1
OUTPUTS = ("report.md", "figures", "tables", "scores")  # written by `report` (scores/ also by `score-run`)
RACY_NS = 2_000_000_000
STAGING_PREFIX = ".report-staging-"  # where `report` writes its outputs before moving them in


def code_identity() -> str:
    """Every file of the installed `gamut_local` package (its bytes) and the Python version."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(sys.version.encode())
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(f"\0{path.relative_to(root).as_posix()}\0".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def settings(run_dir: Path, **options) -> dict:
    """What the report was asked for: the command's options and where relative paths resolve."""
    return {"run_dir": str(Path(run_dir).resolve()), "cwd": os.getcwd(),
            **{k: str(v) if isinstance(v, Path) else v for k, v in sorted(options.items())}}


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _walk(folder: Path, skip: set[str]) -> list[Path]:
    out = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return out
    for e in entries:
        if e.name in skip:
            continue
        if e.is_dir(follow_symlinks=False):
            out += _walk(Path(e.path), set())
        else:
            out.append(Path(e.path))
    return out


def inputs_now(run_dir: Path, outside: list[Path] = ()) -> dict[str, list[int] | None]:
    """{path: stat} of every file of the run directory but the report's outputs (its staging
    folders too: a report's, or one a killed report left), and `outside`."""
    run_dir = Path(run_dir).resolve()
    try:
        staging = {e.name for e in os.scandir(run_dir) if e.name.startswith(STAGING_PREFIX)}
    except OSError:
        staging = set()
    paths = _walk(run_dir, {*OUTPUTS, STAMP, *staging}) + [Path(p).resolve() for p in outside]
    return {str(p): _stat(p) for p in sorted(set(paths))}


def outputs_now(run_dir: Path) -> dict[str, list[int] | None]:
    run_dir = Path(run_dir).resolve()
    paths = [run_dir / OUTPUTS[0]] + [p for folder in OUTPUTS[1:] for p in _walk(run_dir / folder, set())]
    return {str(p): _stat(p) for p in sorted(set(paths))}


def current_report(run_dir: Path, options: dict) -> list[str] | None:
    """The warnings the current report was made with (to say again), or None if the report
    is not current for these options (`settings`)."""
    try:
        stamp = json.loads((Path(run_dir) / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("version") != STAMP_VERSION or stamp.get("settings") != options:
        return None
    recorded = stamp.get("inputs")
    if not isinstance(recorded, dict) or stamp.get("outputs") != outputs_now(run_dir):
        return None
    outside = [Path(p) for p in recorded if not _inside(Path(p), Path(run_dir).resolve())]
    if inputs_now(run_dir, outside) != recorded or stamp.get("code") != code_identity():
        return None
    warnings = stamp.get("warnings")
    return warnings if isinstance(warnings, list) and all(isinstance(w, str) for w in warnings) else None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def forget(run_dir: Path) -> None:
    """No stamp while the outputs are being rewritten (a report stopped half-way is not current)."""
    (Path(run_dir) / STAMP).unlink(missing_ok=True)


def record(run_dir: Path, options: dict, inputs: dict, started_ns: int, warnings: list[str]) -> None:
    """Write the stamp once every output is written; `inputs`: `inputs_now` before reading."""
    from gamut_local.rundir.store import write_json

    if any(s is None or s[1] >= started_ns - RACY_NS for s in inputs.values()):
        return  # a file gone, or changed so recently that a change in the same tick would go unseen
    write_json(Path(run_dir) / STAMP, {"version": STAMP_VERSION, "settings": options, "code": code_identity(),
                                       "inputs": inputs, "outputs": outputs_now(run_dir), "warnings": warnings})
