"""Verdicts checked against the dataset and against each other before they are scored.

Scoring verdicts for a question or check the dataset lacks, or under a tier the dataset does
not give that check, silently changes the score (`table_problems`); so does scoring stale
verdicts as current (`stale_verdicts`). Both work on the columns of a
`data.verdict_table.VerdictTable`.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from gamut_local.data.verdict_table import row_key
from gamut_local.errors import Problem
from gamut_local.rundir.human import is_human
from gamut_local.vocab import SMALL_POOL_MAX, TIERS, VARIANTS

MAX_SHOWN = 20  # problems listed per kind; the rest are counted


def positions(names: list[str], values, missing: int = -1, dtype=np.int64) -> np.ndarray:
    """Each value's position in `names`, `missing` where it is not there. `map` over the dict's
    own `get` runs in C: a generator here cost 0.07 s per 54,000 keys at paper scale."""
    index = {name: i for i, name in enumerate(names)}
    return np.fromiter(map(index.get, values, repeat(missing)), dtype=dtype, count=len(values))


def table_problems(table, question_ids: list[str], checks: dict[tuple, tuple[str, str]]) -> list[Problem]:
    """Each verdict of a `data.verdict_table.VerdictTable` the dataset does not back: unknown
    question, unknown check of a known question, or a tier that is not the check's tier
    (`checks`: `current_checks` of the dataset's questions, compiled with the run's settings).
    Column-wise: every row takes its check's tier by one index (`_row_lookup`), and the first
    verdict of each bad (question, variant, check, tier) is named by file and line (at most
    MAX_SHOWN, then a count). (One settings hash per judge is `verdict_table.check_settings`,
    made on every read.)"""
    if not len(table):
        return []
    known = np.zeros(len(table.questions), dtype=bool)
    at = positions(table.questions, question_ids)
    known[at[at >= 0]] = True
    q, v, c = (table.question, table.questions), (table.variant, list(VARIANTS)), (table.check, table.checks)
    tier = _row_lookup([q, v, c], list(checks), positions(TIERS, [t for t, _ in checks.values()]))
    question_ok = known[table.question]
    bad = ~question_ok | (tier != table.tier)
    rows = np.flatnonzero(bad)
    if not len(rows):
        return []
    sizes = [max(len(table.questions), 1), len(VARIANTS), max(len(table.checks), 1), len(TIERS)]
    key = row_key([table.question[rows], table.variant[rows], table.check[rows], table.tier[rows]], sizes)
    first = rows[np.sort(np.unique(key, return_index=True)[1])]  # each bad combination's first row
    problems = [Problem(table.files[table.file[r]], int(table.line[r]) or None,
                        *_problem(table, r, tier[r], question_ok[r])) for r in first[:MAX_SHOWN].tolist()]
    if len(first) > MAX_SHOWN:
        problems.append(Problem(table.files[0] if len(table.files) == 1 else f"{len(table.files)} verdict files",
                                None, "", f"and {len(first) - MAX_SHOWN} more kinds of verdict the dataset "
                                          "does not back"))
    return problems


def _problem(table, row: int, want: int, question_ok: bool) -> tuple[str, str]:
    """(field, message) for a verdict the dataset does not back (`want`: its check's tier code,
    -3: no such check)."""
    qid, check, tier = table.questions[table.question[row]], table.checks[table.check[row]], TIERS[table.tier[row]]
    if not question_ok:
        return "question_id", f"question {qid!r} is not in the dataset"
    if want < 0:
        return "check_id", f"question {qid!r} has no check {check!r} in the dataset"
    return "tier", f"check {check!r} of {qid!r} is {TIERS[want]!r} in the dataset, not {tier!r}"


# ---------------------------------------------------------------- stale verdicts

NO_IDENTITY = "no identity"  # records made before identity hashes, or written by hand


def current_checks(questions, small_pool_max: int = SMALL_POOL_MAX) -> dict[tuple, tuple[str, str]]:
    """(question, variant, check) -> (tier, check_hash) of every check the judge stage grades
    now: the dataset's questions compiled with the run's settings (`small_pool_max`)."""
    from gamut_local.rubric.compiler import checks_for  # the rubric models: only where a dataset is read
    from gamut_local.rundir.identity import check_hash

    out, hashes = {}, {}
    for q in questions:
        compiled = checks_for(q, small_pool_max)
        for variant in VARIANTS:
            for c in q.checks_for_variant(variant, compiled):
                # Variants mostly share their checks: each wording is hashed once.
                what = (c.text, c.tier, c.kind)
                out[q.question_id, variant, c.check_id] = (c.tier, hashes.get(what) or
                                                           hashes.setdefault(what, check_hash(*what)))
    return out


def _row_lookup(keys: list[tuple[np.ndarray, list[str]]], want_keys: list[tuple], want: np.ndarray) -> np.ndarray:
    """Each row's value in `want` (ints, one per key of `want_keys`), -3 where its key is not
    in `want_keys`. `keys`: (row codes, dictionary) per key part, in the order of the key
    tuples. Each wanted key is looked up once, column by column, and the rows take their
    key's value by one index (keys are mostly dense: questions x checks)."""
    sizes = [max(len(names_k), 1) for _, names_k in keys]
    total = int(np.prod(sizes, dtype=np.int64))
    wanted = np.zeros(len(want_keys), dtype=np.int64)
    known = np.ones(len(want_keys), dtype=bool)
    for (_, names_k), size, column in zip(keys, sizes, zip(*want_keys) if want_keys else [()] * len(keys)):
        part = positions(names_k, column)
        known &= part >= 0
        wanted = wanted * size + part
    wanted, found = wanted[known], np.asarray(want)[known]
    key = row_key([part for part, _ in keys], sizes)
    if total <= 8 * len(key) + 1024:  # dense: one lookup array over every possible key
        lookup = np.full(total, -3, dtype=np.int32)
        lookup[wanted] = found
        return lookup[key]
    order = np.argsort(wanted)
    at = np.minimum(np.searchsorted(wanted, key, sorter=order), max(len(wanted) - 1, 0))
    hit = wanted[order[at]] == key if len(wanted) else np.zeros(len(key), dtype=bool)
    return np.where(hit, found[order[at]] if len(wanted) else -3, -3)


def _mismatch(codes: np.ndarray, names: list[str], keys: list[tuple[np.ndarray, list[str]]],
              want_keys: list[tuple], want_hashes: list[str]) -> np.ndarray:
    """Rows whose hash (`codes` into `names`) differs from their key's in `want_hashes` (`keys`,
    `want_keys`: as `_row_lookup`'s); rows of a key not wanted are not judged here
    (`table_problems` names them); rows without a hash neither."""
    expected = _row_lookup(keys, want_keys, positions(names, want_hashes, -2))  # -2: a hash no row carries
    bad = codes != expected
    bad &= expected != -3
    bad &= codes >= 0
    return bad


def stale_verdicts(table, checks: dict[tuple, tuple[str, str]] | None, answers: dict[tuple, str] | None):
    """(mask of stale rows, {judge: {reason: count}}) for a `data.verdict_table.VerdictTable`.

    A verdict is stale when its `check_hash` is not the check's hash in the dataset now
    (`checks`, from `current_checks`), or its `answer_hash` not the hash of the answer on
    disk now (`answers`: (question, model, variant) -> hash); None: not known, not compared.
    Stale rows are never scored as current. Rows without a hash are counted under
    NO_IDENTITY (kept: they cannot be shown stale either, and the count says so)."""
    n = len(table)
    stale = np.zeros(n, dtype=bool)
    reasons: dict[str, dict[str, int]] = {}
    if not n:
        return stale, reasons
    q, v = (table.question, table.questions), (table.variant, list(VARIANTS))
    compared = (  # (field, (wanted keys, their hashes), the key's columns)
        ("check_hash", checks and (list(checks), [h for _, h in checks.values()]), [q, v, (table.check, table.checks)]),
        ("answer_hash", answers and (list(answers), list(answers.values())), [q, (table.model, table.models), v]))
    for field, want, keys in compared:
        codes = getattr(table, field)
        if not want or codes is None or not (codes >= 0).any():  # nothing to compare with
            continue
        bad = _mismatch(codes, getattr(table, f"{field}es"), keys, *want)
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
