"""The run as the viewer holds it in memory.

Model judges' verdicts are read column-wise from the verdict store by the project's one
verdict reader (`data.verdict_table`: Arrow columns, no Python dict per verdict, no cache),
one judge folder per thread, into integer-coded arrays sorted by
(question, system, check, judge), so a question page is one slice and the adjudication queue
one sort over (response, check) cells.
Human verdicts (few, and rewritten while the app runs) stay records, newest per cell.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from gamut_local.analysis.scoring import system_index
from gamut_local.data.consistency import current_checks, describe_stale, stale_verdicts
from gamut_local.data.dataset import load_questions
from gamut_local.data.records import Answer, Verdict, answer_key, load_records, verdict_key
from gamut_local.errors import InputError
from gamut_local.data.verdict_table import read_verdicts, table_from_records, take_rows
from gamut_local.rubric.compiler import checks_for
from gamut_local.rundir.human import is_human
from gamut_local.rundir.identity import answer_hash, stale_fields
from gamut_local.rundir.layout import sample_files, scores_path
from gamut_local.viewer.opening import RunFiles, read_scores, run_files
from gamut_local.vocab import SMALL_POOL_MAX, VERDICTS

INVALID = VERDICTS.index("invalid")
_COLUMNS = ("question_id", "model", "variant", "judge", "check_id", "tier", "verdict")


@dataclass
class Verdicts:
    """Model judges' verdicts, one row each, sorted by (question, system, check, judge)."""

    judges: list[str]
    systems: list[tuple[str, str]]  # (model, variant)
    checks: list[str]  # check ids (a dictionary shared by all questions)
    q: np.ndarray  # int32 index into RunIndex.question_ids
    s: np.ndarray  # int32 index into systems
    c: np.ndarray  # int32 index into checks
    j: np.ndarray  # int32 index into judges
    code: np.ndarray  # int8 verdict code (vocab.VERDICTS)
    tier: np.ndarray  # int8 tier code
    probs: np.ndarray  # float64 (n, 4) label probabilities, NaN where the judge gave none


@dataclass
class Cells:
    """(response, check) cells: where each starts in the verdict rows and what the queue ranks."""

    key: np.ndarray  # int64 (q * S + s) * C + c, ascending
    start: np.ndarray  # int64 (n_cells + 1,) row offsets
    q: np.ndarray
    s: np.ndarray
    c: np.ndarray
    tier: np.ndarray  # int8
    disagree: np.ndarray  # bool: two judges gave different (valid) labels
    invalid: np.ndarray  # bool: some judge's output could not be read
    entropy: np.ndarray  # float32: highest label entropy of a judge (nats), -1 without probs
    queue: np.ndarray  # int64 cell indices, disagreements first, then least certain


@dataclass
class RunIndex:
    run_dir: Path
    dataset: Path
    questions: dict  # question_id -> Question, in dataset order
    question_ids: list[str]
    answers: dict  # (question_id, model, variant) -> answer dict
    verdicts: Verdicts
    cells: Cells
    humans: dict = field(default_factory=dict)  # judge -> {(qid, model, variant, check_id): record}
    scores: dict | None = None
    notes: list[str] = field(default_factory=list)
    samples: dict = field(default_factory=dict)  # name -> analysis.design.SampleFile (RUN/samples/)
    humans_version: int = 0  # +1 each verdict the viewer writes: what is computed from `humans` is redone
    computed: dict = field(default_factory=dict)  # name -> (humans_version, value): results kept until then
    small_pool_max: int = SMALL_POOL_MAX  # the run's compile setting (manifest.json)
    # What the viewer shows now, computed once when the run is read (the dataset, the compile
    # setting and the answers do not change while the app runs); the stale check used them too.
    current_checks: dict = field(default_factory=dict)  # (question, variant, check) -> (tier, check_hash)
    answer_hashes: dict = field(default_factory=dict)  # (question, model, variant) -> the answer's hash

    @cached_property
    def q_index(self) -> dict[str, int]:
        return {q: i for i, q in enumerate(self.question_ids)}

    @cached_property
    def s_index(self) -> dict[tuple[str, str], int]:
        return {s: i for i, s in enumerate(self.verdicts.systems)}

    @cached_property
    def c_index(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.verdicts.checks)}

    @cached_property
    def _answers_by_question(self) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list] = {}
        for qid, model, variant in self.answers:
            out.setdefault(qid, []).append((model, variant))
        return out

    def answered(self, question_id: str) -> list[tuple[str, str]]:
        """The (model, variant) pairs with an answer to this question."""
        return self._answers_by_question.get(question_id, [])

    def checks(self, question_id: str) -> list:
        q = self.questions.get(question_id)
        return [] if q is None else _checks(q, self.small_pool_max)

    def shown_identity(self, question_id: str, model: str, variant: str, check_id: str) -> dict:
        """The `check_hash` and `answer_hash` of the check and response this viewer shows for a
        cell now (None where it has none to show)."""
        return {"check_hash": self.current_checks.get((question_id, variant, check_id), (None, None))[1],
                "answer_hash": self.answer_hashes.get((question_id, model, variant))}

    def is_stale(self, record: dict) -> bool:
        """Whether a (human) verdict was made on another check wording or answer than shown now."""
        now = self.shown_identity(record["question_id"], record["model"], record["variant"], record["check_id"])
        return bool(stale_fields(record, now))

    def cell_of(self, question_id: str, model: str, variant: str, check_id: str) -> int | None:
        """The cell index of a (response, check), or None when no judge graded it."""
        try:
            qi, si, ci = self.q_index[question_id], self.s_index[(model, variant)], self.c_index[check_id]
        except KeyError:
            return None
        v = self.verdicts
        key = (qi * len(v.systems) + si) * len(v.checks) + ci
        pos = int(np.searchsorted(self.cells.key, key))
        return pos if pos < len(self.cells.key) and self.cells.key[pos] == key else None

    def cell_names(self, cell: int) -> tuple[str, str, str, str]:
        c = self.cells
        model, variant = self.verdicts.systems[c.s[cell]]
        return self.question_ids[c.q[cell]], model, variant, self.verdicts.checks[c.c[cell]]

    def question_rows(self, question_id: str) -> slice:
        """The verdict rows of one question (rows are sorted by question first)."""
        qi = self.q_index.get(question_id)
        if qi is None:
            return slice(0, 0)
        lo, hi = np.searchsorted(self.verdicts.q, [qi, qi + 1])
        return slice(int(lo), int(hi))


_CHECKS_CACHE: dict[tuple[int, int], list] = {}


def _checks(question, small_pool_max: int) -> list:
    # Questions are frozen pydantic models that live as long as the app: cache by identity.
    got = _CHECKS_CACHE.get((id(question), small_pool_max))
    if got is None or got[0] is not question:
        got = _CHECKS_CACHE[id(question), small_pool_max] = (question, checks_for(question, small_pool_max))
    return got[1]


# ---------------------------------------------------------------- the run directory

def open_run(run_dir: Path, dataset: Path | None = None) -> RunIndex:
    """Read a run directory (and the dataset its manifest names) for the viewer: the verdicts
    straight from the store's columns, every time (no cache)."""
    return read_run(run_files(run_dir, dataset))


def read_run(found: RunFiles) -> RunIndex:
    """The run's index (`open_run`), from the files `run_files` found."""
    run_dir, notes, files, small_pool_max = found.run_dir, list(found.notes), found.verdicts, found.small_pool_max
    model_files = [p for p in files if not is_human(p.parent.name)]
    # The verdict reader lets go of the GIL: the model judges' verdicts (the store's files
    # side by side), the answers and the dataset are read at the same time.
    with ThreadPoolExecutor(2) as pool:
        pending = pool.submit(read_verdicts, model_files) if model_files else None
        pending_answers = pool.submit(read_answers, found.answers)
        questions = {q.question_id: q for q in load_questions(found.dataset, check_images=False)}
        answers = pending_answers.result()
        table = pending.result() if pending is not None else table_from_records([])
    checks = current_checks(questions.values(), small_pool_max)
    hashes = {k: answer_hash(a["response"]) for k, a in answers.items()}
    table, stale_notes = _without_stale(table, checks, hashes)
    notes += stale_notes
    verdicts, question_ids = verdicts_from_table(table, list(questions))
    index = RunIndex(run_dir, found.dataset, questions, question_ids, answers, verdicts,
                     build_cells(verdicts, len(question_ids)), notes=notes, small_pool_max=small_pool_max,
                     current_checks=checks, answer_hashes=hashes)
    for judge, records in read_humans([p for p in files if is_human(p.parent.name)]).items():
        index.humans[judge] = records
    index.scores = read_scores(scores_path(run_dir), run_dir, notes)
    index.samples = read_samples(run_dir, notes)
    return index


def read_samples(run_dir: Path, notes: list[str]) -> dict:
    """The run's calibration sample designs by name; a design that cannot be read is a note
    (its queue is not offered), not a reason to refuse the whole run."""
    from gamut_local.analysis.design import read_sample

    out = {}
    for path in sample_files(run_dir):
        try:
            out[path.stem] = read_sample(path)
        except InputError as e:
            notes.append(f"{path.relative_to(run_dir)} is not a sample design ({e.problems[0]}): no queue for it")
    return out


def _without_stale(table, checks: dict, hashes: dict):
    """The model judges' table less its stale verdicts (`checks`, `hashes`: the index's
    `current_checks` and `answer_hashes`), and a note per judge saying so."""
    stale, reasons = stale_verdicts(table, checks, hashes)
    return (take_rows(table, np.flatnonzero(~stale)) if stale.any() else table), describe_stale(reasons)


def read_answers(files: list[Path]) -> dict[tuple, dict]:
    """(question_id, model, variant) -> {"response": ...}, through the strict answer reader."""
    return {answer_key(a): {"response": a["response"]} for a in load_records(files, Answer, answer_key)}


def read_humans(files: list[Path]) -> dict[str, dict]:
    """Human verdicts per judge, the newest record per cell (the loader applies rundir.human)."""
    out: dict[str, dict] = {}
    for r in load_records(files, Verdict, verdict_key) if files else []:
        out.setdefault(r["judge"], {})[(r["question_id"], r["model"], r["variant"], r["check_id"])] = r
    return out


# ---------------------------------------------------------------- column-wise verdicts

def verdicts_from_table(t, question_ids: list[str]) -> tuple[Verdicts, list[str]]:
    """The model judges' VerdictTable sorted by (question, system, check, judge). Questions
    the dataset lacks are added after its own (shown as not in the dataset)."""
    known = set(question_ids)
    question_ids = question_ids + sorted(set(t.questions) - known)
    at = {q: i for i, q in enumerate(question_ids)}
    q = np.array([at[n] for n in t.questions] + [-1], dtype=np.int32)[t.question]
    systems, s = system_index(t)  # sorted by (model, variant), as the scores order them
    # One int64 key orders the rows by (question, system, check, judge): one sort (the reader
    # refused repeated keys, so any sort gives this one order; the default is the fastest).
    key = ((q.astype(np.int64) * max(len(systems), 1) + s) * max(len(t.checks), 1) + t.check) \
        * max(len(t.judges), 1) + t.judge
    order = np.argsort(key)
    return Verdicts(list(t.judges), systems, list(t.checks), q[order], s[order], t.check[order], t.judge[order],
                    t.verdict[order], t.tier[order], t.probs[order]), question_ids


def build_cells(v: Verdicts, n_questions: int) -> Cells:
    """Group the sorted verdict rows into (response, check) cells and rank them for the queue."""
    S, C = max(len(v.systems), 1), max(len(v.checks), 1)
    key = (v.q.astype(np.int64) * S + v.s) * C + v.c
    if len(key) == 0:
        z = np.zeros(0, dtype=np.int64)
        return Cells(z, np.zeros(1, np.int64), z, z, z, z.astype(np.int8), z.astype(bool), z.astype(bool),
                     z.astype(np.float32), z)
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    start = np.r_[first, len(key)].astype(np.int64)
    valid = v.code != INVALID
    lo = np.minimum.reduceat(np.where(valid, v.code, 99), first)
    hi = np.maximum.reduceat(np.where(valid, v.code, -1), first)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.asarray(v.probs, dtype=np.float64)
        terms = np.log(p)  # one (n, 4) temporary: p log p in place, 0 where p is 0 or NaN
        np.multiply(terms, p, out=terms)
        np.copyto(terms, 0.0, where=~(p > 0))
        h = -terms.sum(axis=1)
    h = np.where(np.isnan(p).all(axis=1), -1.0, h).astype(np.float32)
    entropy = np.maximum.reduceat(h, first)
    disagree = (lo < 99) & (hi >= 0) & (lo != hi)
    cell = np.arange(len(first))
    queue = np.lexsort((cell, -entropy, ~disagree))
    return Cells(key[first], start, v.q[first], v.s[first], v.c[first], v.tier[first], disagree,
                 np.logical_or.reduceat(~valid, first), entropy, queue)
