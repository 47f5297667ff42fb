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

import hashlib
import json
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

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
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
    return SampleFile(sample_id=f"{name}-{digest}", **body)


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
        return SampleFile.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise InputError([Problem(str(path), None, "", "sample design not found: run `gamut-local sample` first")])
    except ValidationError as e:
        raise InputError(pydantic_problems(e, str(path), None)) from None


def probability_of(design: SampleFile) -> dict[tuple[str, str, str], float]:
    """(model, variant, question) -> inclusion probability, for every response the design drew."""
    prob = {(st.model, st.variant): st.inclusion_probability for st in design.strata}
    return {(r.model, r.variant, r.question_id): prob[(r.model, r.variant)] for r in design.responses}


def sample_verdicts(design: SampleFile, records) -> tuple[dict[str, set], list[str], list[tuple[dict, str, str]]]:
    """Human verdicts held against the design they may have been made for.

    `records`: the gold human judges' current verdicts (dicts; the viewer's calibration queue
    writes `sample_id` and `inclusion_probability` into each). Returns
    - outside: {judge: {(model, variant, question)}}: drawn responses on which the judge has a
      verdict NOT made in this sample's queue (another queue, another sample): such a response
      is not labeled for this design until every check of it is graded in its queue, because
      the other queues choose what people see (the disagreement queue: the hardest cells);
    - notes: one line per judge counting its verdicts made outside this sample (not used);
    - errors: (record, field, message) for a record that says it was made for this sample but
      is on a response the design did not draw, or carries another inclusion probability: the
      design file and the verdicts disagree, and no estimate from them can be trusted.
    """
    drawn = probability_of(design)
    outside: dict[str, set] = {}
    elsewhere: dict[str, int] = {}
    errors = []
    for r in records:
        key = (r["model"], r["variant"], r["question_id"])
        if r.get("sample_id") != design.sample_id:
            elsewhere[r["judge"]] = elsewhere.get(r["judge"], 0) + 1
            if key in drawn:
                outside.setdefault(r["judge"], set()).add(key)
            continue
        if key not in drawn:
            errors.append((r, "sample_id", f"made for sample {design.sample_id}, which did not draw this response"))
        elif r.get("inclusion_probability") is not None and r["inclusion_probability"] != drawn[key]:
            errors.append((r, "inclusion_probability", f"{r['inclusion_probability']!r}, but the design gives "
                           f"{drawn[key]!r}"))
    notes = [f"{judge}: {n} verdicts made outside the calibration sample {design.sample_id} (another queue or "
             f"sample) are not used for its correction"
             + (f"; {len(outside[judge])} drawn responses count as labeled only once every check of them is "
                "graded in the sample's queue" if outside.get(judge) else "")
             for judge, n in sorted(elsewhere.items())]
    return outside, notes, errors
