"""`gamut-local compare SCORES.json`: the text-only versus multimodal comparison of each
judge's models, read from a `gamut-local score` output file; the statistics are in
`analysis.comparisons`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gamut_local.analysis.comparisons import variant_comparison
from gamut_local.errors import InputError, Problem


def compare_scores_file(path: Path) -> dict:
    """Variant comparison for every judge in a `gamut-local score` output file."""
    name = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError([Problem(name, None, "", "file not found")])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError([Problem(name, None, "", f"not a JSON file: {e}")])
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise InputError([Problem(name, None, "models", "expected the `models` list that `gamut-local score` writes")])
    problems, by_judge = [], {}
    for i, m in enumerate(models):
        missing = [k for k in ("judge", "model", "variant", "gamut_score") if not isinstance(m, dict) or k not in m]
        if missing:
            problems.append(Problem(name, None, f"models.{i}", "missing " + ", ".join(missing)))
            continue
        score = m["gamut_score"]
        if score is not None and not isinstance(score, (int, float)):
            problems.append(Problem(name, None, f"models.{i}.gamut_score", "expected a number or null"))
            continue
        by_judge.setdefault(m["judge"], []).append(((m["model"], m["variant"]),
                                                    np.nan if score is None else float(score)))
    if problems:
        raise InputError(problems)
    return {judge: variant_comparison([s for s, _ in rows], [v for _, v in rows])
            for judge, rows in sorted(by_judge.items())}
