"""A run directory over the bundled sample, built without a model, for the viewer's tests,
screenshots and demos.

Two judges: the sample's gold verdicts, and `synthetic-judge`, a seeded perturbation of them
(a share of verdicts moved to another label, label probabilities peaked on the label given, a
few invalid), so judges disagree on some cells and the queue has an order to show.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import gamut_local

from gamut_local.vocab import JUDGE_LABELS

SAMPLE = Path(gamut_local.__file__).resolve().parent / "data" / "sample"
SYNTHETIC_JUDGE = "synthetic-judge"


def _jsonl(path: Path, records) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records), encoding="utf-8")


def perturb(gold: list[dict], *, seed: int = 0, flip: float = 0.3, invalid: float = 0.02,
            judge: str = SYNTHETIC_JUDGE) -> list[dict]:
    """A second judge: each gold verdict kept or moved to another label, with probabilities."""
    rng = np.random.default_rng(seed)
    out = []
    for g in gold:
        label = g["verdict"]
        u = rng.random()
        if u < invalid:
            out.append({**g, "judge": judge, "verdict": "invalid", "raw": "(unreadable)", "probs": None})
            continue
        if u < invalid + flip or label not in JUDGE_LABELS:
            label = str(rng.choice([x for x in JUDGE_LABELS if x != label]))
        top = float(rng.uniform(0.4, 0.97))
        rest = rng.dirichlet(np.ones(len(JUDGE_LABELS) - 1)) * (1.0 - top)
        probs, k = {}, 0
        for lab in JUDGE_LABELS:
            if lab == label:
                probs[lab] = top
            else:
                probs[lab] = float(rest[k])
                k += 1
        out.append({**g, "judge": judge, "verdict": label, "raw": label, "probs": probs})
    return out


def build_sample_run(run_dir: str | Path, *, seed: int = 0, flip: float = 0.3) -> Path:
    """Write manifest.json and verdicts/<judge>/<model>.<variant>.jsonl for the sample.

    The manifest points at the sample's questions and reference answers (as `extra_answers`),
    like a run of configs/runs/sample.yaml would. Scores are not written (the score stage does)."""
    run_dir = Path(run_dir)
    gold = [json.loads(line) for line in (SAMPLE / "verdicts" / "gold.jsonl").read_text().splitlines() if line]
    synthetic = perturb(gold, seed=seed, flip=flip)
    for records in (gold, synthetic):
        by_file: dict[tuple, list] = {}
        for r in records:
            by_file.setdefault((r["judge"], r["model"], r.get("variant", "multimodal")), []).append(r)
        for (judge, model, variant), rows in by_file.items():
            _jsonl(run_dir / "verdicts" / judge / f"{model}.{variant}.jsonl", rows)
    manifest = {"run": "sample-view", "config": {
        "name": "sample-view", "dataset": str(SAMPLE / "questions.jsonl"),
        "extra_answers": [str(SAMPLE / "answers" / "reference.jsonl")], "extra_verdicts": [], "seed": seed}}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return run_dir
