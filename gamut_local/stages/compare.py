"""`gamut-local compare SCORES.json`: the text-only versus multimodal comparison of each
judge's models, read from a `gamut-local score` output file; the statistics are in
`analysis.comparisons`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gamut_local.analysis.comparisons import variant_comparison
from gamut_local.errors import InputError, Problem
from gamut_local.rundir.store import parse_json_text

NAMES = ("judge", "model", "variant")


def compare_scores_file(path: Path) -> dict:
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
    return {judge: variant_comparison([s for s, _ in rows], [v for _, v in rows])
            for judge, rows in sorted(by_judge.items())}
