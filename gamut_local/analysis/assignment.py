"""Sharing a calibration sample among a team of annotators, on plain data (no file I/O).

The design (`analysis.design.SampleFile`) lists its drawn responses in grading order, round by
round: round r holds the r-th drawn response of every stratum (system), and within a stratum
the rounds are in the draw's random order. `plan` gives each response one annotator, or two on
the overlap, by walking every stratum in round order and handing each slot to the team member
with the fewest slots of that stratum so far (fewest overall, then join order, on a tie). So:

- each annotator's share of every stratum differs from another's by at most one;
- each annotator's queue (`queue`: their ungraded responses in design order) is round-ordered,
  and their rounds are spread over the whole design, not a block of it;
- whichever responses the team has graded so far, those of a stratum are a set of its rounds
  chosen without looking at the responses, hence a simple random sample of the stratum: what
  the team has graded is a stratified random sample at every moment, as the design's prefix is.

The overlap (`overlap_set`): round(overlap x N) responses graded by two people, for the
agreement between people (`analysis.human_agreement`). It is allotted to strata in proportion
to their size (largest remainders, ties broken at random) and, within a stratum, one response
is drawn at random from each of k equal stretches of its rounds (systematic sampling with a
random point in each stretch), so it is spread over rounds and strata. The random draws are
seeded from the design's `sample_id` (`seed_of`): the same design and overlap, the same
overlap responses, on any machine.

`replan` is the same walk for a changed team: a response's annotators who graded it in full
keep it (a removed annotator included: graded work stays with whoever graded it), and only the
slots left, ungraded work, are handed out again among the current team, balanced as above over
the work that is left; an annotator already holding an ungraded response keeps it where that
costs no balance. Who graded what is the caller's (`reporting.team.graded_by` reads it from a
run with the correction's rule: a response is graded by an annotator when their human verdicts
made in the sample's queue cover every check of it).
"""

from __future__ import annotations

import math

import numpy as np

from gamut_local.errors import InputError, Problem
from gamut_local.hashing import short_hash
from gamut_local.rundir.assignments import Assignments, Response, load  # noqa: F401  (one place to import from)
from gamut_local.rundir.human import check_annotator

__all__ = ["Assignments", "Response", "load", "seed_of", "rounds", "overlap_set", "plan", "replan", "queue",
           "progress", "check_overlap", "check_team"]


def seed_of(sample_id: str) -> int:
    """A 63-bit seed from the design's `sample_id` (a hash: the same on every machine)."""
    return int(short_hash(sample_id, chars=16), 16) >> 1


def rounds(design) -> list[tuple[Response, tuple[str, str], int]]:
    """(response, stratum, round) for each drawn response, in design order; a response's round
    is how many of its stratum come before it."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for r in sorted(design.responses, key=lambda r: r.order):
        h = (r.model, r.variant)
        out.append(((r.model, r.variant, r.question_id), h, seen.get(h, 0)))
        seen[h] = seen.get(h, 0) + 1
    return out


def check_overlap(overlap, source: str = "--overlap") -> float:
    """The overlap share, or an InputError: a finite number in [0, 1)."""
    if isinstance(overlap, bool) or not isinstance(overlap, (int, float)) or not math.isfinite(overlap) \
            or not 0 <= overlap < 1:
        raise InputError([Problem(source, None, "", f"{overlap!r}: the share of responses graded by two "
                                  "people is a number in [0, 1) (e.g. 0.1)")])
    return float(overlap)


def check_team(annotators, source: str = "annotators") -> tuple[str, ...]:
    """The team, each a valid annotator name, once, at least one."""
    team = tuple(check_annotator(a, source) for a in annotators)
    if not team:
        raise InputError([Problem(source, None, "", "no annotators: add some first (`annotators add NAME`)")])
    if len(set(team)) != len(team):
        raise InputError([Problem(source, None, "", f"an annotator is named twice: {', '.join(team)}")])
    return team


def overlap_set(design, overlap: float, seed: int) -> set[Response]:
    """The responses graded by two people: round(overlap x N) of the N drawn, allotted to
    strata in proportion to size (largest remainders, random ties) and spread over each
    stratum's rounds (one at random in each of k equal stretches)."""
    rng = np.random.default_rng(seed)
    by_stratum: dict[tuple[str, str], list[Response]] = {}
    for resp, h, _ in rounds(design):
        by_stratum.setdefault(h, []).append(resp)
    strata = sorted(by_stratum)
    n = len(design.responses)
    want = int(math.floor(overlap * n + 0.5))  # to the nearest, halves up
    if not strata or want == 0:
        return set()
    quota = np.array([overlap * len(by_stratum[h]) for h in strata])
    k = np.floor(quota).astype(int)
    order = np.lexsort((rng.random(len(strata)), -(quota - k)))  # largest remainder first, random ties
    k[order[: want - int(k.sum())]] += 1
    out = set()
    for h, kh in zip(strata, k.tolist()):
        if not kh:  # a small stratum whose share of the overlap rounded to none
            continue
        resp = by_stratum[h]
        cuts = [-(-i * len(resp) // kh) for i in range(kh + 1)]  # ceil(i n / k): k stretches of >= 1
        out.update(resp[int(rng.integers(lo, hi))] for lo, hi in zip(cuts[:-1], cuts[1:]))
    return out


def plan(design, annotators, overlap: float, seed: int | None = None,
         graded_by: dict[str, set] | None = None) -> Assignments:
    """A fresh assignment of `design` to the team `annotators` (join order) with `overlap`;
    responses someone already graded in full (`graded_by`: annotator -> responses) stay
    theirs."""
    overlap = check_overlap(overlap)
    seed = seed_of(design.sample_id) if seed is None else seed
    empty = Assignments(design.name, design.sample_id, overlap, seed, check_team(annotators), {})
    return replan(empty, design, annotators, graded_by or {})


def replan(old: Assignments, design, annotators, graded_by: dict[str, set]) -> Assignments:
    """`old` for the team `annotators` (current, join order): graded work stays with whoever
    graded it; every other slot (one per response, two on the overlap) is handed out again
    among the team, balanced per stratum over the work left and in round order."""
    team = check_team(annotators)
    two = overlap_set(design, old.overlap, old.seed)
    mine = {a: 0 for a in team}
    per_stratum: dict[tuple, dict[str, int]] = {}
    out: dict[Response, tuple[str, ...]] = {}
    for resp, h, _ in rounds(design):
        before = old.responses.get(resp, ())
        slots = 2 if resp in two else 1
        kept = [a for a in before if resp in graded_by.get(a, ())]
        # Someone not assigned who graded it in full fills a free slot; beyond the slots they
        # stay unassigned (an adjudicator of the overlap is, by being no assignee).
        others = sorted(a for a, done in graded_by.items() if resp in done and a not in before)
        kept += others[:max(slots - len(kept), 0)]
        counts = per_stratum.setdefault(h, {a: 0 for a in team})
        while len(kept) < slots:
            free = [a for a in team if a not in kept]
            if not free:
                break  # a team of one cannot grade an overlap response twice
            pick = min(free, key=lambda a: (counts[a], mine[a], a not in before, team.index(a)))
            kept.append(pick)
            counts[pick] += 1
            mine[pick] += 1
        out[resp] = tuple(kept)
    return Assignments(old.sample, old.sample_id, old.overlap, old.seed, team, out)


def queue(assignments: Assignments, annotator: str, graded: set) -> list[Response]:
    """The annotator's assigned responses they have not graded in full, in design order."""
    return [r for r, who in assignments.responses.items() if annotator in who and r not in graded]


def progress(assignments: Assignments, graded_by: dict[str, set]) -> dict:
    """Per annotator (the team, then anyone else assigned) `assigned` and `graded` responses;
    `team`: the responses, those graded by at least one assignee (`labeled`), those graded by
    everyone assigned (`complete`), and the overlap's (responses with two assignees)."""
    people = list(assignments.annotators) + sorted({a for who in assignments.responses.values() for a in who}
                                                   - set(assignments.annotators))
    per = {a: {"assigned": 0, "graded": 0} for a in people}
    labeled = complete = overlap = overlap_complete = 0
    for r, who in assignments.responses.items():
        done = [a for a in who if r in graded_by.get(a, ())]
        for a in who:
            per[a]["assigned"] += 1
            per[a]["graded"] += a in done
        labeled += bool(done)
        complete += len(done) == len(who)
        if len(who) > 1:
            overlap += 1
            overlap_complete += len(done) == len(who)
    return {"annotators": per, "team": {"responses": len(assignments.responses), "labeled": labeled,
                                        "complete": complete, "overlap": overlap,
                                        "overlap_complete": overlap_complete}}
