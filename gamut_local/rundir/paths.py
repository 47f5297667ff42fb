"""Output paths checked before anything is read or written: an `--out` that is an input, or
a folder holding one, would destroy the input; a path inside a run's store (its `answers/`,
`verdicts/`, `superseded/`: however spelled, a symbolic link included) would be read by every
stage as the run's own results, beside or over them; a parent that is a file, or an output
that is a folder, would fail only after the work is done.

Every command that writes a path the user named calls `check_outputs` first.
"""

from __future__ import annotations

import os
from pathlib import Path

from gamut_local.errors import InputError, Problem


def _resolved(p: Path) -> Path:
    try:
        return Path(os.path.realpath(p))
    except (OSError, RuntimeError):  # a symlink loop: compare it as written
        return Path(os.path.abspath(p))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)  # hard links too
    except OSError:
        return False


def output_problems(out: str | Path, inputs, *, field: str = "--out", folder: bool = False) -> list[Problem]:
    """What is wrong with writing `out` (a file, or with `folder` a directory of outputs)."""
    out = Path(out)
    where, real = str(out), _resolved(out)
    problems = []
    for i in inputs:
        i = Path(i)
        ri = _resolved(i)
        if ri == real or _same_file(out, i):
            problems.append(Problem(where, None, field, f"is also an input ({i}); writing it would destroy "
                                    "the input: choose another output path"))
        elif real in ri.parents and (folder or out.is_dir()):
            problems.append(Problem(where, None, field, f"contains the input {i}; choose an output "
                                    "folder that holds no input"))
        elif ri in real.parents and i.is_dir():  # `import DIR --out DIR/0001-x.yaml`
            problems.append(Problem(where, None, field, f"is inside the input folder {i}, which the "
                                    "command reads whole; choose an output path outside it"))
    store = run_store(out)
    if store is not None:
        problems.append(Problem(where, None, field, f"is inside {store}, a run's store, which only the run's own "
                                "stages and `verdicts import` write (every reader would take the file as the "
                                "run's results); choose an output path outside it"))
    if not folder and out.is_dir():
        problems.append(Problem(where, None, field, "is a directory; give a file path"))
    if folder and out.exists() and not out.is_dir():
        problems.append(Problem(where, None, field, "exists and is not a directory"))
    for parent in real.parents:
        if parent.exists():
            if not parent.is_dir():
                problems.append(Problem(where, None, field, f"{parent} is not a directory"))
            break
    return problems


# A run's stores: what its stages write and read back as its results.
STORE_FOLDERS = ("answers", "verdicts", "superseded")


def run_store(path: str | Path) -> Path | None:
    """The store folder of a run that `path` resolves into (None: none)."""
    real = _resolved(Path(path))
    for folder in (real, *real.parents):
        if folder.name in STORE_FOLDERS and _is_run(folder.parent):
            return folder
    return None


def _is_run(folder: Path) -> bool:
    """A run directory, by what its stages leave: a manifest, answers, superseded results, or
    a verdicts folder holding a judge's store unit (not any folder that has a `verdicts/`: a
    folder of exported JSONL may be called so)."""
    if (folder / "manifest.json").is_file() or (folder / "answers").is_dir() or (folder / "superseded").is_dir():
        return True
    try:
        return (folder / "verdicts").is_dir() and any(
            p.suffix in (".parquet", ".parts") for judge in (folder / "verdicts").iterdir()
            if judge.is_dir() for p in judge.iterdir())
    except OSError:  # unreadable: not known to be a run
        return False


def check_outputs(outs: dict[str, str | Path | None], inputs, *, folders: tuple[str, ...] = ()) -> None:
    """Raise one InputError for every problem with the outputs (field -> path; None skipped)."""
    inputs = [Path(i) for i in inputs if i is not None]
    problems = [p for field, out in outs.items() if out is not None
                for p in output_problems(out, inputs, field=field, folder=field in folders)]
    if problems:
        raise InputError(problems)


def inside(path: str | Path, root: str | Path) -> bool:
    """Whether `path` resolves to `root` or somewhere under it."""
    rp, rr = _resolved(Path(path)), _resolved(Path(root))
    return rp == rr or rr in rp.parents


# What a run writes under its output_dir: an input there would be overwritten or read twice.
RUN_FILES = ("rubric.jsonl", "manifest.json", "report.md")
RUN_FOLDERS = ("answers", "verdicts", "scores", "figures", "tables", "slurm")


def run_dir_problems(output_dir: str | Path, inputs: dict[str, list], source: str) -> list[Problem]:
    """An output_dir that is a file, or inputs (field -> paths) where the run writes."""
    out = Path(output_dir)
    problems = []
    if out.exists() and not out.is_dir():
        problems.append(Problem(source, None, "output_dir", f"{out} exists and is not a directory"))
    for parent in _resolved(out).parents:
        if parent.exists():
            if not parent.is_dir():
                problems.append(Problem(source, None, "output_dir", f"{parent} is not a directory"))
            break
    for field, paths in inputs.items():
        for i, p in enumerate(paths):
            where = field if len(paths) == 1 and field == "dataset" else f"{field}.{i}"
            if any(_resolved(Path(p)) == _resolved(out / f) for f in RUN_FILES) or \
                    any(inside(p, out / d) for d in RUN_FOLDERS):
                problems.append(Problem(source, None, where, f"{p} is inside output_dir, where the run "
                                        "writes its own files; keep inputs outside answers/, verdicts/, "
                                        "scores/, figures/, tables/, slurm/"))
    return problems
