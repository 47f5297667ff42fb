"""Verdicts checked against the dataset and against each other before they are scored.

Scoring verdicts for a question or check the dataset lacks, or under a tier the dataset does
not give that check, silently changes the score (`table_problems`); so does scoring stale
verdicts as current (`stale_verdicts`). Both work on the columns of a
`data.verdict_table.VerdictTable`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gamut_local.data.verdict_table import distinct, row_key
from gamut_local.errors import Problem
from gamut_local.rubric.compiler import checks_for
from gamut_local.rundir.human import is_human
from gamut_local.vocab import SMALL_POOL_MAX, TIERS, VARIANTS

MAX_SHOWN = 20  # problems listed per kind; the rest are counted


def _checks(question, variant: str, compiled: dict):
    # A question may grade its text_only answers on other checks (the release's text-only split);
    # its compiled checks serve both variants (`compiled`: question id -> checks, this call's).
    if question.question_id not in compiled:
        compiled[question.question_id] = checks_for(question)
    pick = getattr(question, "checks_for_variant", None)
    return pick(variant, compiled[question.question_id]) if pick else compiled[question.question_id]


def table_problems(table, questions) -> list[Problem]:
    """Each verdict of a `data.verdict_table.VerdictTable` the dataset does not back: unknown
    question, unknown check of a known question, or a tier that is not the check's tier.
    Column-wise: each distinct (question, variant, check, tier) is looked up once, and the
    first verdict of each bad one is named by file and line (at most MAX_SHOWN, then a count).
    (One settings hash per judge is `verdict_table.check_settings`, made on every read.)"""
    n = len(table)
    if not n:
        return []
    nv, nc, nt = len(VARIANTS), max(len(table.checks), 1), len(TIERS)
    sizes = (max(len(table.questions), 1), nv, nc, nt)
    key = row_key([table.question, table.variant, table.check, table.tier], list(sizes))
    combos = distinct(key, int(np.prod(sizes, dtype=np.int64)))
    by_id = {q.question_id: q for q in questions}
    tiers: dict[tuple, dict[str, str]] = {}
    compiled: dict[str, list] = {}
    bad: dict[int, tuple[str, str]] = {}
    for k, q, v, c, t in zip(combos.tolist(), *(p.tolist() for p in np.unravel_index(combos, sizes))):
        qid, variant, check, tier = table.questions[q], VARIANTS[v], table.checks[c], TIERS[t]
        if qid not in by_id:
            bad[k] = ("question_id", f"question {qid!r} is not in the dataset")
            continue
        if (qid, variant) not in tiers:
            tiers[qid, variant] = {x.check_id: x.tier for x in _checks(by_id[qid], variant, compiled)}
        want = tiers[qid, variant].get(check)
        if want is None:
            bad[k] = ("check_id", f"question {qid!r} has no check {check!r} in the dataset")
        elif want != tier:
            bad[k] = ("tier", f"check {check!r} of {qid!r} is {want!r} in the dataset, not {tier!r}")
    if not bad:
        return []
    keys = np.array(sorted(bad), dtype=np.int64)
    rows = np.flatnonzero(np.isin(key, keys))
    first: dict[int, int] = {}
    for r in rows.tolist():
        first.setdefault(int(key[r]), r)
        if len(first) == len(bad):
            break
    order = sorted(first.items(), key=lambda kr: kr[1])
    problems = [Problem(table.files[table.file[r]], int(table.line[r]) or None, *bad[k]) for k, r in order[:MAX_SHOWN]]
    if len(order) > MAX_SHOWN:
        problems.append(Problem(table.files[0] if len(table.files) == 1 else f"{len(table.files)} verdict files",
                                None, "", f"and {len(order) - MAX_SHOWN} more kinds of verdict the dataset "
                                          "does not back"))
    return problems


def check_against_dataset(table, dataset) -> None:
    """Raise InputError if any verdict of `table` is for a question, check or tier that the
    dataset file (None: nothing to check) does not have; `score --dataset` calls this."""
    if dataset is None:
        return
    from gamut_local.data.dataset import load_questions
    from gamut_local.errors import InputError

    problems = table_problems(table, load_questions(Path(dataset), check_images=False))
    if problems:
        raise InputError(problems)


# ---------------------------------------------------------------- stale verdicts

NO_IDENTITY = "no identity"  # records made before identity hashes, or written by hand


def current_check_hashes(questions, small_pool_max: int = SMALL_POOL_MAX) -> dict[tuple, str]:
    """(question, variant, check) -> the `check_hash` a verdict on it must carry now."""
    from gamut_local.rundir.identity import check_hash

    out, hashes = {}, {}
    for q in questions:
        compiled = checks_for(q, small_pool_max)
        for variant in VARIANTS:
            for c in q.checks_for_variant(variant, compiled):
                # Variants mostly share their checks: each wording is hashed once.
                what = (c.text, c.tier, c.kind)
                out[q.question_id, variant, c.check_id] = hashes.get(what) or hashes.setdefault(what, check_hash(*what))
    return out


def _mismatch(codes: np.ndarray, names: list[str], keys: list[tuple[np.ndarray, list[str]]], want: dict) -> np.ndarray:
    """Rows whose hash (`codes` into `names`) differs from `want[key]`; rows of a key `want`
    lacks are not judged here (another check names them); rows without a hash neither.
    `keys`: (row codes, dictionary) per key part, in the order of `want`'s key tuples. Each
    entry of `want` is looked up once, column by column, and the rows take their key's
    expected hash by one index (keys are dense: questions x checks)."""
    sizes = [max(len(names_k), 1) for _, names_k in keys]
    total = int(np.prod(sizes, dtype=np.int64))
    # -3: a key `want` lacks; -2: a hash no row carries.
    wanted = np.zeros(len(want), dtype=np.int64)
    known = np.ones(len(want), dtype=bool)
    for (_, names_k), size, column in zip(keys, sizes, zip(*want) if want else [()] * len(keys)):
        index = {name: i for i, name in enumerate(names_k)}
        part = np.fromiter((index.get(x, -1) for x in column), dtype=np.int64, count=len(want))
        known &= part >= 0
        wanted = wanted * size + part
    index = {h: i for i, h in enumerate(names)}
    found = np.fromiter((index.get(h, -2) for h in want.values()), dtype=np.int64, count=len(want))
    wanted, found = wanted[known], found[known]
    key = row_key([part for part, _ in keys], sizes)
    if total <= 8 * len(key) + 1024:  # dense: one lookup array over every possible key
        lookup = np.full(total, -3, dtype=np.int32)
        lookup[wanted] = found
        expected = lookup[key]
    else:
        order = np.argsort(wanted)
        at = np.minimum(np.searchsorted(wanted, key, sorter=order), max(len(wanted) - 1, 0))
        hit = wanted[order[at]] == key if len(wanted) else np.zeros(len(key), dtype=bool)
        expected = np.where(hit, found[order[at]] if len(wanted) else -3, -3)
    bad = codes != expected
    bad &= expected != -3
    bad &= codes >= 0
    return bad


def stale_verdicts(table, checks: dict[tuple, str] | None, answers: dict[tuple, str] | None):
    """(mask of stale rows, {judge: {reason: count}}) for a `data.verdict_table.VerdictTable`.

    A verdict is stale when its `check_hash` is not the check's hash in the dataset now
    (`checks`, from `current_check_hashes`), or its `answer_hash` not the hash of the answer on
    disk now (`answers`: (question, model, variant) -> hash); None: not known, not compared.
    Stale rows are never scored as current. Rows without a hash are counted under
    NO_IDENTITY (kept: they cannot be shown stale either, and the count says so)."""
    n = len(table)
    stale = np.zeros(n, dtype=bool)
    reasons: dict[str, dict[str, int]] = {}
    if not n:
        return stale, reasons
    q, v = (table.question, table.questions), (table.variant, list(VARIANTS))
    for field, want, keys in (("check_hash", checks, [q, v, (table.check, table.checks)]),
                              ("answer_hash", answers, [q, (table.model, table.models), v])):
        codes = getattr(table, field)
        if not want or codes is None or not (codes >= 0).any():  # nothing to compare with
            continue
        bad = _mismatch(codes, getattr(table, f"{field}es"), keys, want)
        _count(reasons, table, bad & ~stale, field)
        stale |= bad
    if checks is not None and table.check_hash is not None:
        _count(reasons, table, table.check_hash < 0, NO_IDENTITY)
    return stale, reasons


def _count(reasons: dict, table, rows: np.ndarray, reason: str) -> None:
    for j, k in zip(*np.unique(table.judge[rows], return_counts=True)):
        reasons.setdefault(table.judges[j], {})[reason] = int(k)


def describe_stale(reasons: dict[str, dict[str, int]]) -> list[str]:
    """One line per judge for the console and the report."""
    lines = []
    for judge, counts in sorted(reasons.items()):
        stale = {r: n for r, n in counts.items() if r != NO_IDENTITY}
        redo = "annotate them again in `gamut-local view`" if is_human(judge) else "rerun `gamut-local judge`"
        if stale:
            lines.append(f"{judge}: {sum(stale.values())} stale verdicts left out ("
                         + ", ".join(f"{r} differs: {n}" for r, n in sorted(stale.items()))
                         + f"): made for another check wording or answer; {redo}")
        if counts.get(NO_IDENTITY):
            lines.append(f"{judge}: {counts[NO_IDENTITY]} verdicts carry no check_hash (made before identity "
                         f"hashes, or by hand): scored, but they cannot be shown current; {redo} to "
                         "re-grade them")
    return lines
