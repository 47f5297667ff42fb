"""Shards and the run directory's file names, shared by generate, judge and score-run.

Shard `i/n` takes the questions whose index in sorted(question_id) is i modulo n: the same
split on every machine, whatever order the dataset lists them in.

Concurrent SLURM array tasks never append to the same file: shard i of n writes
`<model>.<variant>.shard-i-of-n.jsonl` beside the unsharded `<model>.<variant>.jsonl`, and
everything that reads results (resume, judge, score, report) reads all of them. Resume reads
every sibling file, so switching between sharded and unsharded runs never duplicates a key.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError, Problem
from .store import read_jsonl, repair_tail

_SHARD = re.compile(r"(\d+)/(\d+)")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    @property
    def suffix(self) -> str:
        return "" if self.count == 1 else f".shard-{self.index}-of-{self.count}"

    def select(self, question_ids: list[str]) -> set[str]:
        return {q for k, q in enumerate(sorted(question_ids)) if k % self.count == self.index}


def parse_shard(text: str | None) -> Shard:
    if text is None:
        return Shard()
    m = _SHARD.fullmatch(text.strip())
    if not m or not int(m.group(1)) < int(m.group(2)):
        raise InputError([Problem("--shard", None, "", f"expected i/n with 0 <= i < n, got {text!r}")])
    return Shard(int(m.group(1)), int(m.group(2)))


def check_name(name: str, what: str, source: str) -> None:
    """Model and judge names become file names: keep them to a safe alphabet."""
    if not _NAME.fullmatch(name):
        raise InputError([Problem(source, None, what,
                                  f"{name!r} cannot be used in a file name (letters, digits, _ . + - only)")])


def pick(specs, name: str | None, what: str, source: str) -> list:
    """All of a run's models (or judges), or the one named on the command line."""
    if name is None:
        return list(specs)
    chosen = [m for m in specs if m.name == name]
    if not chosen:
        known = ", ".join(m.name for m in specs) or "none"
        raise InputError([Problem(source, None, what, f"no {what[:-1]} named {name!r} in this run (known: {known})")])
    return chosen


def answers_path(run_dir: Path, model: str, variant: str, shard: Shard = Shard()) -> Path:
    return Path(run_dir) / "answers" / f"{model}.{variant}{shard.suffix}.jsonl"


def verdicts_path(run_dir: Path, judge: str, model: str, variant: str, shard: Shard = Shard()) -> Path:
    return Path(run_dir) / "verdicts" / judge / f"{model}.{variant}{shard.suffix}.jsonl"


def _siblings(path: Path) -> list[Path]:
    """The unsharded file and every shard file of the same (model, variant)."""
    stem = path.name[: -len(".jsonl")]
    found = [p for p in path.parent.glob(f"{stem}.shard-*-of-*.jsonl")]
    return sorted(([path] if path.exists() else []) + found)


def answer_files(run_dir: Path, model: str, variant: str) -> list[Path]:
    return _siblings(answers_path(run_dir, model, variant))


def verdict_files(run_dir: Path, judge: str | None = None) -> list[Path]:
    """Every verdict file in the run (of one judge, if given), shards included."""
    root = Path(run_dir) / "verdicts"
    pattern = f"{judge}/*.jsonl" if judge else "*/*.jsonl"
    return sorted(root.glob(pattern))


def verdict_siblings(run_dir: Path, judge: str, model: str, variant: str) -> list[Path]:
    return _siblings(verdicts_path(run_dir, judge, model, variant))


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
        # Another shard's task may be appending to its file right now: its unfinished last
        # line is not done (and not ours to repair).
        for no, rec in read_jsonl(path, allow_empty=True, whole_lines_only=True):
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


@contextmanager
def progress_bars(console, progress=None):
    """A rich Progress for a stage: the caller's (run shows one for all stages) or a new one."""
    if progress is not None:
        yield progress
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console) as bars:
        yield bars


@contextmanager
def load_and_close(spec):
    """The default way a stage gets an engine: load it, close it when the stage is done.

    Stages take `open_engine` (a callable spec -> context manager yielding an engine) so that
    `run` can keep one engine for two stages when candidate and judge are the same weights.
    """
    from .engines import load_engine  # heavy: torch / vLLM; only when a model is needed

    engine = load_engine(spec)
    try:
        yield engine
    finally:
        engine.close()
