"""The calibration sample: a seeded stratified random sample of a run's responses that humans
grade in full, so that corrected scores (`analysis.correction`) can use their verdicts as a
random sample. The design (population, strata, inclusion probabilities, seed) is written to
`RUN/samples/<name>.json` (`SampleFile`); docs/outputs.md documents every field.

A response is a (model, variant, question). Strata are systems, (model, variant):

- `per="model"`: each system's own simple random sample of `n` of its responses (all of them
  if it has fewer); inclusion probability n_h / N_h in stratum h.
- `per="shared"`: one simple random sample of `n` of the questions every system answered,
  the same for every system, so differences between systems are paired; a response to a
  question some system lacks cannot be drawn (probability 0) and is outside the population
  the corrected scores speak for.

The order of `responses` is the order to grade them in: round by round, one response of every
stratum a round (`shared`: every system's answer to one question a round), so whatever prefix
people have graded is itself a stratified random sample.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from gamut_local.hashing import short_hash

SCHEMA_VERSION = 1
PER = ("model", "shared")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Stratum(_Out):
    model: str
    variant: str
    population: int  # responses of this system the sample was drawn from (or could have been)
    sampled: int
    inclusion_probability: float
    questions: list[str]  # the population, sorted


class SampledResponse(_Out):
    model: str
    variant: str
    question_id: str
    order: int  # grade in this order (0 first)


class SampleFile(_Out):
    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["gamut-local calibration sample"] = "gamut-local calibration sample"
    sample_id: str
    name: str
    seed: int
    per: Literal["model", "shared"]
    responses_requested: int
    strata: list[Stratum]
    responses: list[SampledResponse]


def draw(population: dict[tuple[str, str], list[str]], n: int, *, per: str, seed: int, name: str) -> SampleFile:
    """The seeded sample of `n` responses per system from `population` {(model, variant):
    question ids}. Same arguments, same sample, whatever order the population is listed in."""
    if per not in PER:
        raise ValueError(f"per must be one of {PER}, got {per!r}")
    rng = np.random.default_rng(seed)
    systems = sorted(population)
    pools = {h: sorted(set(population[h])) for h in systems}
    if per == "shared":
        common = sorted(set.intersection(*(set(q) for q in pools.values()))) if pools else []
        picked = [common[i] for i in rng.permutation(len(common))[:n]]
        chosen = {h: picked for h in systems}
        prob = {h: len(picked) / len(common) if common else 0.0 for h in systems}
    else:
        chosen = {h: [pools[h][i] for i in rng.permutation(len(pools[h]))[:n]] for h in systems}
        prob = {h: len(chosen[h]) / len(pools[h]) if pools[h] else 0.0 for h in systems}
    strata = [Stratum(model=m, variant=v, population=len(pools[(m, v)]), sampled=len(chosen[(m, v)]),
                      inclusion_probability=prob[(m, v)], questions=pools[(m, v)]) for m, v in systems]
    rounds = max((len(c) for c in chosen.values()), default=0)
    responses = [SampledResponse(model=m, variant=v, question_id=chosen[(m, v)][r], order=0)
                 for r in range(rounds) for m, v in systems if r < len(chosen[(m, v)])]
    responses = [r.model_copy(update={"order": k}) for k, r in enumerate(responses)]
    body = {"name": name, "seed": seed, "per": per, "responses_requested": n,
            "strata": [s.model_dump() for s in strata], "responses": [r.model_dump() for r in responses]}
    return SampleFile(sample_id=content_id(body), **body)


def content_id(body: dict) -> str:
    """A design's `sample_id`: its name and a hash of everything else it says. Human verdicts
    made in its queue carry it, so a design edited after people graded it no longer matches."""
    digest = short_hash(json.dumps(body, sort_keys=True))
    return f"{body['name']}-{digest}"


def inclusion(design: SampleFile, systems: list[tuple[str, str]], questions: list[str]):
    """(population, sampled, probability), each (S, Q) over a Scores' systems and questions:
    the response is in the design's population, was drawn, and its inclusion probability."""
    S, Q = len(systems), len(questions)
    s_of = {tuple(h): i for i, h in enumerate(systems)}
    q_of = {q: i for i, q in enumerate(questions)}
    population, sampled = np.zeros((S, Q), dtype=bool), np.zeros((S, Q), dtype=bool)
    prob = np.zeros((S, Q))
    for st in design.strata:
        s = s_of.get((st.model, st.variant))
        if s is None:
            continue
        # shared: only questions every system answered could be drawn
        drawable = _common(design) if design.per == "shared" else set(st.questions)
        cols = [q_of[q] for q in st.questions if q in q_of and q in drawable]
        population[s, cols] = st.inclusion_probability > 0
        prob[s, cols] = st.inclusion_probability
    for r in design.responses:
        s, q = s_of.get((r.model, r.variant)), q_of.get(r.question_id)
        if s is not None and q is not None:
            sampled[s, q] = True
    return population, sampled, prob


def _common(design: SampleFile) -> set[str]:
    sets = [set(st.questions) for st in design.strata]
    return set.intersection(*sets) if sets else set()


def read_sample(path) -> SampleFile:
    """A sample design file, checked: one line per problem, naming the file and the field."""
    from pathlib import Path

    from pydantic import ValidationError

    from gamut_local.errors import InputError, Problem, pydantic_problems

    path = Path(path)
    try:
        design = SampleFile.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise InputError([Problem(str(path), None, "", "sample design not found: run `gamut-local sample` first")])
    except (OSError, UnicodeDecodeError) as e:
        raise InputError([Problem(str(path), None, "", f"cannot read the sample design: {e}")]) from None
    except ValidationError as e:
        raise InputError(pydantic_problems(e, str(path), None)) from None
    problems = design_problems(design, str(path))
    if problems:
        raise InputError(problems)
    return design


def design_problems(design: SampleFile, source: str) -> list:
    """What makes a design unusable, one Problem per field: a `sample_id` that is not its
    content's (`content_id`: the file was edited after the draw), and a design that is not
    the draw it says it is (probabilities, counts, responses against its own population)."""
    from gamut_local.errors import Problem

    body = design.model_dump(exclude={"schema_version", "kind", "sample_id"})
    want = content_id(body)
    if design.sample_id != want:
        return [Problem(source, None, "sample_id", f"{design.sample_id!r} is not this design's content ({want!r}): "
                        "the file was changed after it was drawn, and human verdicts carry the id of the design "
                        "they graded; restore it, or draw a new sample under another --name")]
    return _strata_problems(design, source) + _response_problems(design, source)


def _strata_problems(design: SampleFile, source: str) -> list:
    """Each stratum once, its population its questions, and its inclusion probability in (0, 1]
    and the one the draw gives: sampled / population (shared: / the questions all share)."""
    from gamut_local.errors import Problem

    problems, seen = [], set()
    common = _common(design)
    for i, st in enumerate(design.strata):
        at = f"strata.{i}"
        if (st.model, st.variant) in seen:
            problems.append(Problem(source, None, f"{at}.model", f"{st.model} ({st.variant}) has two strata"))
        seen.add((st.model, st.variant))
        if st.population != len(set(st.questions)) or len(st.questions) != len(set(st.questions)):
            problems.append(Problem(source, None, f"{at}.population", f"{st.population}, but the stratum lists "
                                    f"{len(st.questions)} questions ({len(set(st.questions))} different)"))
        p = st.inclusion_probability
        if not (math.isfinite(p) and 0 < p <= 1):
            problems.append(Problem(source, None, f"{at}.inclusion_probability", f"{p!r}: a drawn response's "
                                    "probability of being drawn is a number in (0, 1]"))
            continue
        frame = len(common) if design.per == "shared" else st.population
        if not 0 < st.sampled <= frame or not math.isclose(p, st.sampled / frame, rel_tol=1e-9):
            problems.append(Problem(source, None, f"{at}.inclusion_probability", f"{p!r}, but {st.sampled} drawn of "
                                    f"{frame} {'questions every system shares' if design.per == 'shared' else 'responses'}"
                                    " give " + (f"{st.sampled / frame!r}" if frame else "none")))
    return problems


def _response_problems(design: SampleFile, source: str) -> list:
    """Every drawn response in its stratum's population (shared: the same questions for every
    system), once, as many per stratum as it says it drew, in an order 0..n-1."""
    from gamut_local.errors import Problem

    strata = {(st.model, st.variant): st for st in design.strata}
    common = _common(design)
    problems, seen, count = [], set(), {}
    for i, r in enumerate(design.responses):
        st = strata.get((r.model, r.variant))
        if st is None:
            problems.append(Problem(source, None, f"responses.{i}.model", f"{r.model} ({r.variant}) has no stratum "
                                    "in `strata`: the design cannot say how likely this response was drawn"))
        elif r.question_id not in st.questions or (design.per == "shared" and r.question_id not in common):
            problems.append(Problem(source, None, f"responses.{i}.question_id", f"{r.question_id!r} is not in the "
                                    f"population of {r.model} ({r.variant}) the sample was drawn from"))
        if (r.model, r.variant, r.question_id) in seen:
            problems.append(Problem(source, None, f"responses.{i}", f"{r.question_id} of {r.model} ({r.variant}) "
                                    "is drawn twice"))
        seen.add((r.model, r.variant, r.question_id))
        count[(r.model, r.variant)] = count.get((r.model, r.variant), 0) + 1
    for i, st in enumerate(design.strata):
        if count.get((st.model, st.variant), 0) != st.sampled:
            problems.append(Problem(source, None, f"strata.{i}.sampled", f"{st.sampled}, but `responses` lists "
                                    f"{count.get((st.model, st.variant), 0)} of {st.model} ({st.variant})"))
    if sorted(r.order for r in design.responses) != list(range(len(design.responses))):
        problems.append(Problem(source, None, "responses.order", "the grading order must number the responses "
                                f"0 to {len(design.responses) - 1}, each once"))
    if design.per == "shared" and len({frozenset(r.question_id for r in design.responses
                                                 if (r.model, r.variant) == h) for h in strata}) > 1:
        problems.append(Problem(source, None, "responses", "a shared sample draws the same questions for every "
                                "system; these differ between systems"))
    return problems


def probability_of(design: SampleFile) -> dict[tuple[str, str, str], float]:
    """(model, variant, question) -> inclusion probability, for every response the design drew."""
    prob = {(st.model, st.variant): st.inclusion_probability for st in design.strata}
    return {(r.model, r.variant, r.question_id): prob[(r.model, r.variant)] for r in design.responses}


@dataclass(frozen=True)
class CheckedSample:
    """A design and the gold human verdicts held against it (`check_sample`): what every
    corrected score is computed from. `in_queue`: {human judge: {(model, variant, question)}}
    the drawn responses on which every verdict of that judge was made in this sample's queue;
    only those can be labeled by a human (gold judges that are not people are taken as they
    are). `notes`: what was left out, for `scores.json`'s `correction.notes`. `team`: the
    team's rule for a response several people graded (`analysis.correction.TeamRule`), None
    without a team's assignment of this sample."""

    design: SampleFile
    in_queue: dict
    notes: list
    team: object = None


def check_sample(design: SampleFile, records, where, gold: str, juries: dict | None = None) -> CheckedSample:
    """The one check every corrected score passes through (`score`, `score-run`, `report`,
    `plan-sample`, the viewer's live leaderboard), raising InputError with every problem.

    `records`: human verdicts as dicts (the viewer's calibration queue writes `sample_id` and
    `inclusion_probability` into each); those of judges `gold` does not name are ignored.
    `where[i]`: (file, line) record i was read from. A record that says it was made for this
    sample must be on a response the design drew, with the design's inclusion probability (a
    finite number): otherwise the design and the verdicts disagree, and no estimate from them
    can be trusted. A verdict made anywhere else (the disagreement queue chooses the hardest
    cells; another sample's queue) is not a random label: a drawn response with one is left
    out until every check of it is graded again in this queue. `juries`: {jury: members}
    (`RUN/juries/`); a jury with a gold judge among its members would be corrected against
    itself, and is refused.
    """
    from gamut_local.errors import InputError, Problem
    from gamut_local.rundir.human import is_gold, is_human

    drawn = probability_of(design)
    mine: dict[str, dict] = {}  # judge -> response -> all its verdicts there made in this queue
    elsewhere: dict[str, int] = {}
    problems = []
    for r, (file, line) in zip(records, where):
        judge = r.get("judge", "")
        if not (is_human(judge) and is_gold(judge, gold)):
            continue
        key = (r["model"], r["variant"], r["question_id"])
        ok = r.get("sample_id") == design.sample_id
        if not ok:
            elsewhere[judge] = elsewhere.get(judge, 0) + 1
        elif key not in drawn:
            problems.append(Problem(file, line, "sample_id", f"{r['question_id']} / {r['check_id']}: made for sample "
                                    f"{design.sample_id}, which did not draw this response ({r['model']}, "
                                    f"{r['variant']})"))
        elif not _same_probability(r.get("inclusion_probability"), drawn[key]):
            problems.append(Problem(file, line, "inclusion_probability", f"{r['question_id']} / {r['check_id']}: "
                                    f"{r.get('inclusion_probability', 'missing')!r}, but the design gives "
                                    f"{drawn[key]!r}"))
        if key in drawn:
            mine.setdefault(judge, {})[key] = mine.get(judge, {}).get(key, True) and ok
    problems += _jury_problems(juries or {}, gold)
    if problems:
        raise InputError(problems)
    in_queue = {judge: {k for k, ok in got.items() if ok} for judge, got in mine.items()}
    notes = [f"{judge}: {n} verdicts made outside the calibration sample {design.sample_id} (another queue or "
             f"sample) are not used for its correction"
             + (f"; {left} drawn responses count as labeled only once every check of them is graded in the "
                "sample's queue" if (left := len(mine.get(judge, {})) - len(in_queue.get(judge, ()))) else "")
             for judge, n in sorted(elsewhere.items())]
    return CheckedSample(design, in_queue, notes)


def _same_probability(value, want: float) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value == want)


def _jury_problems(juries: dict, gold: str) -> list:
    from gamut_local.errors import Problem
    from gamut_local.rundir.human import is_gold

    return [Problem(source, None, "members", f"the jury {name!r} has the gold judge(s) "
                    f"{', '.join(m for m in members if is_gold(m, gold))} among its members: correcting it against "
                    "them would use the gold labels twice; correct another judge, or make the jury without them")
            for name, (source, members) in sorted(juries.items()) if any(is_gold(m, gold) for m in members)]
