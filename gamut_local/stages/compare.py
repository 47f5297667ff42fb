"""`gamut-local compare SCORES.json`: the text-only versus multimodal comparison of each
judge's models, read from a `gamut-local score` output file; the statistics are in
`analysis.comparisons`.

Coverage: when every system of a judge is complete (`complete` in the scores file) the
systems' `gamut_score`s are compared as written. An incomplete one is refused, naming the
systems and their counts, unless `allow_incomplete`: then the per-response file beside the
scores file gives each system's score on the questions every system of that judge has
complete (`analysis.scoring.common_questions`), and `n_questions` says how many."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from gamut_local.analysis.comparisons import variant_comparison
from gamut_local.analysis.scoring import ALLOW_HINT, common_questions, common_scores, scores_from_columns
from gamut_local.errors import InputError, Problem
from gamut_local.rundir.store import parse_json_text

NAMES = ("judge", "model", "variant")


@dataclass(frozen=True)
class ModelGain:
    model: str
    multimodal: float | None
    text_only: float | None
    gain: float | None


@dataclass(frozen=True)
class JudgeComparison:
    """One judge's text-only against multimodal (`analysis.comparisons.variant_comparison`),
    on `n_questions` questions (None, with a note, where the scores file cannot say)."""

    models: tuple[ModelGain, ...]
    n_models: int
    mean_gain: float | None
    pearson_r_multimodal_gain: float | None
    kendall_tau_b_rankings: float | None
    notes: dict[str, str]
    n_questions: int | None


@dataclass(frozen=True)
class Comparison:
    judges: dict[str, JudgeComparison]

    def as_json(self) -> dict:
        """The comparison file `compare --out` writes: per judge, its comparison."""
        return {judge: asdict(c) for judge, c in self.judges.items()}


def compare_scores_file(path: Path, allow_incomplete: bool = False) -> Comparison:
    """Variant comparison for every judge in a `gamut-local score` output file."""
    name = str(path)
    try:
        data, why = parse_json_text(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError([Problem(name, None, "", "file not found")])
    except UnicodeDecodeError as e:
        raise InputError([Problem(name, None, "", f"not a JSON file: not valid UTF-8 (byte {e.start})")])
    if why:
        raise InputError([Problem(name, None, "", f"not a JSON file: {why}")])
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise InputError([Problem(name, None, "models", "expected the `models` list that `gamut-local score` writes")])
    problems, by_judge, first = [], {}, {}
    for i, m in enumerate(models):
        missing = [k for k in (*NAMES, "gamut_score") if not isinstance(m, dict) or k not in m]
        if missing:
            problems.append(Problem(name, None, f"models.{i}", "missing " + ", ".join(missing)))
            continue
        bad = [k for k in NAMES if not isinstance(m[k], str) or not m[k]]
        score = m["gamut_score"]
        if bad:
            problems += [Problem(name, None, f"models.{i}.{k}", f"expected a name, got {m[k]!r}") for k in bad]
            continue
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            problems.append(Problem(name, None, f"models.{i}.gamut_score", "expected a number or null"))
            continue
        key = tuple(m[k] for k in NAMES)
        if key in first:  # two scores for one system: which to compare is a guess
            problems.append(Problem(name, None, f"models.{i}", f"judge {key[0]!r}, model {key[1]!r}, variant "
                                    f"{key[2]!r} appears twice (first at models.{first[key]})"))
            continue
        first[key] = i
        by_judge.setdefault(m["judge"], []).append(((m["model"], m["variant"]),
                                                    np.nan if score is None else float(score)))
    if problems:
        raise InputError(problems)
    gaps = [m for m in models if m.get("complete") is False]
    if gaps and not allow_incomplete:
        raise InputError([_gap(name, m) for m in gaps[:20]] + [Problem(name, None, "models", ALLOW_HINT)])
    common = _on_common_questions(Path(path), data) if gaps else {}
    out = {}
    for judge, rows in sorted(by_judge.items()):
        systems, values = [s for s, _ in rows], [v for _, v in rows]
        n_questions, note = _n_questions([m for m in models if m["judge"] == judge])
        if judge in common:
            values, n_questions, note = common[judge]
            values = [values.get(s, np.nan) for s in systems]
        c = variant_comparison(systems, values)
        models, notes = tuple(ModelGain(**m) for m in c.pop("models")), c.pop("notes")
        out[judge] = JudgeComparison(models=models, **c, n_questions=n_questions,
                                     notes={**notes, **({"coverage": note} if note else {})})
    return Comparison(out)


def _gap(name: str, m: dict) -> Problem:
    return Problem(name, None, "models", f"incomplete: judge {m['judge']!r}, {m['model']} ({m['variant']}): "
                   f"{m.get('n_complete_responses')} of {m.get('n_questions')} questions complete, "
                   f"{m.get('n_missing_verdicts')} of {m.get('n_expected')} expected verdicts missing")


def _n_questions(rows: list[dict]) -> tuple[int | None, str | None]:
    """Questions a judge's complete systems are compared on, or None and why it is unknown."""
    counts = [m.get("n_questions") for m in rows]
    if any(not isinstance(n, int) or m.get("complete") is not True for n, m in zip(counts, rows)):
        return None, ("the scores file does not say whether its systems are complete (written before "
                      "coverage was recorded): score the verdicts again")
    return (min(counts) if counts else 0), None


def _on_common_questions(path: Path, data: dict) -> dict:
    """{judge: ({system: points}, n_questions, note)} for each judge with an incomplete system,
    from the per-response file beside the scores file."""
    from gamut_local.data.reading import read_responses  # only when a system is incomplete

    name = data.get("responses_file")
    beside = path.with_name(name) if isinstance(name, str) and name and Path(name).name == name else None
    try:
        cols = read_responses(beside) if beside is not None else None
        scores = scores_from_columns(cols, sorted(set(data.get("judges") or [])), seed=0, n_boot=1,
                                     formula={}) if cols is not None else None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        scores = None
    if scores is None:
        raise InputError([Problem(str(path), None, "responses_file", "an incomplete system is compared on the "
                                  "questions every system has, which needs the per-response file `score` "
                                  f"writes beside the scores file ({name!r} is not readable)")])
    out = {}
    for j, judge in enumerate(scores.judges):
        common = common_questions(scores, j)
        points, _ = common_scores(scores, j, common)
        n_expected = int((scores.expected[scores.graded[j]] > 0).any(axis=0).sum())
        out[judge] = ({sys: float(v) if np.isfinite(v) else np.nan for sys, v in zip(scores.systems, points)},
                      int(common.sum()), f"--allow-incomplete: compared on the {int(common.sum())} of {n_expected} "
                      "questions every system of this judge has complete")
    return out
