"""The run directory's file names and shards, shared by every stage that reads or writes a run.

Shard `i/n` takes the questions whose index in sorted(question_id) is i modulo n: the same
split on every machine, whatever order the dataset lists them in. A pilot (`--limit N`) keeps
only the first N of them, before sharding, and writes the same files as the full run, which
later resumes from what the pilot wrote.

Concurrent SLURM array tasks never append to the same file: shard i of n writes
`<model>.<variant>.shard-i-of-n.jsonl` beside the unsharded `<model>.<variant>.jsonl`, and
everything that reads results (resume, judge, score, report) reads all of them. Resume reads
every sibling file, so switching between sharded and unsharded runs never duplicates a key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gamut_local.errors import InputError, Problem
from gamut_local.rundir import verdict_store
from gamut_local.vocab import NAME_PATTERN

_SHARD = re.compile(r"(\d+)/(\d+)")
_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1
    limit: int | None = None  # pilot: only the first `limit` questions by sorted question_id

    @property
    def suffix(self) -> str:
        return "" if self.count == 1 else f".shard-{self.index}-of-{self.count}"

    def select(self, question_ids: list[str]) -> set[str]:
        ids = sorted(question_ids)[:self.limit]  # a limit of None keeps them all
        return {q for k, q in enumerate(ids) if k % self.count == self.index}


def parse_shard(text: str | None, limit: int | None = None) -> Shard:
    """`--shard i/n` and `--limit N` as the Shard both stages select questions by."""
    if limit is not None and limit < 1:
        raise InputError([Problem("--limit", None, "", f"expected a number of questions >= 1, got {limit}")])
    if text is None:
        return Shard(limit=limit)
    m = _SHARD.fullmatch(text.strip())
    if not m or not int(m.group(1)) < int(m.group(2)):
        raise InputError([Problem("--shard", None, "", f"expected i/n with 0 <= i < n, got {text!r}")])
    return Shard(int(m.group(1)), int(m.group(2)), limit)


def name_problem(name, what: str, source: str, line: int | None = None) -> Problem | None:
    """The one guard for names that become paths (model, judge, run names, from any source)."""
    if isinstance(name, str) and _NAME.fullmatch(name):
        return None
    return Problem(source, line, what, f"{name!r} cannot be used in a file name (1-128 letters, digits, "
                                       "_ . + -, starting with a letter or digit)")


def check_name(name: str, what: str, source: str) -> None:
    """Model and judge names become file names: keep them to a safe alphabet."""
    problem = name_problem(name, what, source)
    if problem:
        raise InputError([problem])


def _safe(**names: str) -> None:
    # Every result path is built here, so no name from any source (config, an extra answers
    # file, the command line) can make a path that leaves the run directory.
    problems = [p for what, n in names.items() if (p := name_problem(n, what, "<result file name>"))]
    if problems:
        raise InputError(problems)


def answers_path(run_dir: Path, model: str, variant: str, shard: Shard = Shard()) -> Path:
    _safe(model=model, variant=variant)
    return Path(run_dir) / "answers" / f"{model}.{variant}{shard.suffix}.jsonl"


def verdicts_path(run_dir: Path, judge: str, model: str, variant: str, shard: Shard = Shard()) -> Path:
    _safe(judge=judge, model=model, variant=variant)
    return Path(run_dir) / "verdicts" / judge / f"{model}.{variant}{shard.suffix}.jsonl"


def store_path(run_dir: Path, judge: str, model: str, variant: str, shard: Shard = Shard()) -> Path:
    """The verdict store unit a (judge, model, variant, shard) task writes (`rundir.verdict_store`)."""
    _safe(judge=judge, model=model, variant=variant)
    return Path(run_dir) / "verdicts" / judge / f"{model}.{variant}{shard.suffix}{verdict_store.SUFFIX}"


def superseded_path(run_dir: Path, live: Path) -> Path:
    """Where stale records moved out of a live answers or verdicts file are kept: the same
    relative path under `superseded/`, a folder no stage reads results from."""
    return Path(run_dir) / "superseded" / Path(live).relative_to(run_dir)


def scores_path(run_dir: Path) -> Path:
    return Path(run_dir) / "scores" / "scores.json"


def _siblings(path: Path) -> list[Path]:
    """The unsharded file and every shard file of the same (model, variant)."""
    stem, suffix = path.name[: -len(path.suffix)], path.suffix
    found = [p for p in path.parent.glob(f"{stem}.shard-*-of-*{suffix}")]
    return sorted(([path] if path.exists() else []) + found)


def answer_files(run_dir: Path, model: str, variant: str) -> list[Path]:
    return _siblings(answers_path(run_dir, model, variant))


def all_answer_files(run_dir: Path) -> list[Path]:
    """Every answers file the run generated (all models, variants and shards)."""
    return sorted((Path(run_dir) / "answers").glob("*.jsonl"))


def verdict_files(run_dir: Path, judge: str | None = None) -> list[Path]:
    """Every verdict store unit and JSONL verdict file (human verdicts; an old run's) in the run
    (of one judge, if given), shards included. A task's verdicts in both forms (an old run
    half converted by hand) are refused: read together they would count twice."""
    root = Path(run_dir) / "verdicts"
    folder = root / judge if judge else root
    units = verdict_store.units_in(folder) if folder.is_dir() else []
    jsonl = sorted(root.glob(f"{judge}/*.jsonl" if judge else "*/*.jsonl"))
    both = [p for p in jsonl if p.with_suffix(verdict_store.SUFFIX) in set(units)]
    if both:
        raise InputError([Problem(str(p), None, "", f"these verdicts are also in the store "
                                  f"({p.with_suffix(verdict_store.SUFFIX).name}); keep one form: delete this "
                                  "file if `gamut-local verdicts import` brought it in already") for p in both])
    verdict_store.note_old_jsonl(jsonl, root)
    return sorted(units + jsonl)


def verdict_siblings(run_dir: Path, judge: str, model: str, variant: str) -> list[Path]:
    """Every file of one (judge, model, variant) over all shard layouts: store units and JSONL."""
    unit = store_path(run_dir, judge, model, variant)
    units = {p for p in verdict_store.units_in(unit.parent) if p.name == unit.name
             or (p.name.startswith(unit.stem + ".shard-") and p.suffix == verdict_store.SUFFIX)} \
        if unit.parent.is_dir() else set()
    return sorted(units | set(_siblings(verdicts_path(run_dir, judge, model, variant))))


def check_seed(seed: int, source: str = "--seed") -> None:
    """A bootstrap seed is what numpy takes: a whole number >= 0 (the run config's `seed` has
    the same bound, config.RunSpec)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError([Problem(source, None, "", f"must be a whole number >= 0, got {seed!r}")])


def check_chunk_size(n: int | None, source: str = "--chunk-size") -> None:
    """A chunk is requests per engine call and per atomic append: at least one."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise InputError([Problem(source, None, "", f"must be a whole number >= 1, got {n!r}")])


def sample_path(run_dir: Path, name: str) -> Path:
    """The calibration sample design `name` (`gamut-local sample --name`)."""
    _safe(sample=name)
    return Path(run_dir) / "samples" / f"{name}.json"


def sample_files(run_dir: Path) -> list[Path]:
    return sorted((Path(run_dir) / "samples").glob("*.json"))


def find_sample(run_dir: Path, name: str | None) -> Path:
    """The run's calibration sample design: the one named, or the only one there is."""
    if name is not None:
        return sample_path(run_dir, name)
    found = sample_files(run_dir)
    if len(found) != 1:
        why = "no calibration sample: run `gamut-local sample` first" if not found else \
            f"{len(found)} samples ({', '.join(p.stem for p in found)}): name one with --sample"
        raise InputError([Problem(str(Path(run_dir) / "samples"), None, "", why)])
    return found[0]
