"""Corrected scores proved by simulation: bias, RMSE, CI coverage and CI width of the judge-only,
human-only and PPI++ corrected estimates, at several sample sizes, over many seeds.

    .venv/bin/python scripts/bench_correction.py [--seeds 500] [--questions 1000] \
        [--sizes 25,50,100,200,400] [--out results/bench_correction]

Each seed simulates a run (`tests.support.simulate`: 4 systems, known true verdicts,
judges with chosen confusion matrices), scores it with the project's scorer, draws the
calibration sample with `analysis.design.draw` (per system, n responses each; smaller n are
prefixes of the same draw) and estimates with `analysis.correction.estimate_on`, the code
`score --correct-with` runs. The truth a CI should cover is the mean true response score over
the population of questions (one simulation of 200,000 questions, to ~0.1 points); bias and
RMSE are against each run's own true score. Judge-only CIs are the CLT interval of the
judge's mean (the bootstrap's within a hair). Ranking: the share of seeds whose estimates
order the four systems exactly as their true run scores do.

Writes OUT.json (every number) and OUT.png (coverage, width and bias against n) and prints a
Markdown table.
"""

from __future__ import annotations

import os
import sys

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from gamut_local.analysis.correction import estimate_on  # noqa: E402
from gamut_local.analysis.design import draw  # noqa: E402
from gamut_local.analysis.metrics import score_responses  # noqa: E402
from gamut_local.analysis.stats import cohen_kappa, confusion_matrix  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.support
from tests.support.simulate import simulate, standard_judges  # noqa: E402

Z = 1.959963984540054
ESTIMATORS = ("judge_only", "human_only", "corrected")


def population_truth() -> np.ndarray:
    """Per system: the mean true response score over a very large question set, in points."""
    sim = simulate(10**6, n_questions=200_000, judges=[])
    truth, _ = sim.response_scores(score_responses)
    return 100 * truth.mean(axis=1)


def one_seed(seed: int, n_questions: int, sizes: list[int]) -> tuple[dict, dict]:
    """({(judge, n): {estimator: (S, 3) [estimate, low, high]}}, {"truth": (S,), "kappa": {judge: k}})."""
    sim = simulate(seed, n_questions=n_questions)
    truth, _ = sim.response_scores(score_responses)
    pop = {(s, "multimodal"): sim.questions for s in sim.systems}
    order = draw(pop, max(sizes), per="model", seed=seed + 1, name="bench")
    picked = {s: [] for s in sim.systems}
    for r in order.responses:
        picked[r.model].append(sim.questions.index(r.question_id))
    out, kappa = {}, {}
    mask = np.broadcast_to(sim.mask, sim.truth.shape)
    for judge in sim.judged:
        scores, _ = sim.response_scores(score_responses, judge)
        kappa[judge] = cohen_kappa(confusion_matrix(sim.truth[mask], sim.judged[judge][mask], 4))
        mean, sd = 100 * scores.mean(axis=1), 100 * scores.std(axis=1) / np.sqrt(n_questions)
        for n in sizes:
            est = {k: np.empty((len(sim.systems), 3)) for k in ESTIMATORS}
            est["judge_only"][:] = np.stack([mean, mean - Z * sd, mean + Z * sd], axis=1)
            for s, name in enumerate(sim.systems):
                labeled = np.zeros(n_questions, dtype=bool)
                labeled[picked[name][:n]] = True
                r = estimate_on(scores[s], np.where(labeled, truth[s], np.nan), labeled)
                est["corrected"][s] = r["score"], r["ci_low"], r["ci_high"]
                est["human_only"][s] = r["human_only"], r["human_only_ci_low"], r["human_only_ci_high"]
            out[(judge, n)] = est
    return out, {"truth": 100 * truth.mean(axis=1), "kappa": kappa}


def summarise(runs: list, pop: np.ndarray, judges: list[str], sizes: list[int]) -> list[dict]:
    truth = np.stack([info["truth"] for _, info in runs])  # (seeds, S)
    true_rank = np.argsort(-truth, axis=1)
    rows = []
    for judge in judges:
        kappa = float(np.mean([info["kappa"][judge] for _, info in runs]))
        for n in sizes:
            for name in ESTIMATORS:
                e = np.stack([est[(judge, n)][name] for est, _ in runs])  # (seeds, S, 3)
                err = e[:, :, 0] - truth
                rows.append({
                    "judge": judge, "kappa": kappa, "n": n, "estimator": name,
                    "judge_off": float(np.mean(np.stack([est[(judge, n)]["judge_only"][:, 0] for est, _ in runs])
                                               - truth)),
                    "bias": float(err.mean()), "bias_se": float(err.std() / np.sqrt(err.size)),
                    "rmse": float(np.sqrt((err ** 2).mean())),
                    "coverage": float(((e[:, :, 1] <= pop) & (pop <= e[:, :, 2])).mean()),
                    "coverage_of_run_truth": float(((e[:, :, 1] <= truth) & (truth <= e[:, :, 2])).mean()),
                    "width": float((e[:, :, 2] - e[:, :, 1]).mean()),
                    "ranking": float((np.argsort(-e[:, :, 0], axis=1) == true_rank).all(axis=1).mean()),
                })
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| judge | κ vs truth | n per system | estimator | bias | RMSE | coverage | CI width | exact ranking |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["estimator"] == "judge_only" and r["n"] != min(x["n"] for x in rows):
            continue  # the same at every n
        lines.append(f"| {r['judge']} | {r['kappa']:.2f} | {'all' if r['estimator'] == 'judge_only' else r['n']} | "
                     f"{r['estimator']} | {r['bias']:+.2f} | {r['rmse']:.2f} | {100 * r['coverage']:.1f}% | "
                     f"{r['width']:.2f} | {100 * r['ranking']:.0f}% |")
    return "\n".join(lines)


def targets(rows: list[dict]) -> dict:
    """The issue's three targets, checked on these rows."""
    corrected = [r for r in rows if r["estimator"] == "corrected"]
    human = {(r["judge"], r["n"]): r for r in rows if r["estimator"] == "human_only"}
    coverage = [r["coverage"] for r in corrected]
    off = [r for r in corrected if 4 <= r["judge_off"] <= 11]
    good = [r for r in corrected if r["kappa"] >= 0.6]
    cut = [1 - r["width"] / human[(r["judge"], r["n"])]["width"] for r in good]
    return {
        "coverage_min": min(coverage), "coverage_max": max(coverage),
        "coverage_within_95_pm_2": all(0.93 <= c <= 0.97 for c in coverage),
        "max_abs_bias_where_judge_off_4_to_11": max((abs(r["bias"]) for r in off), default=None),
        "bias_under_0.3": all(abs(r["bias"]) < 0.3 for r in off),
        "min_width_cut_where_kappa_ge_0.6": min(cut, default=None),
        "width_cut_at_least_25pct": all(c >= 0.25 for c in cut),
    }


def first_n_ranking(rows: list[dict], share: float = 0.9) -> dict:
    """Per judge and estimator: the smallest n at which `share` of seeds get the exact true ranking."""
    out = {}
    for r in sorted(rows, key=lambda r: r["n"]):
        key = f"{r['judge']}/{r['estimator']}"
        out.setdefault(key, None)
        if out[key] is None and r["ranking"] >= share:
            out[key] = "all" if r["estimator"] == "judge_only" else r["n"]
    return out


def figure(rows: list[dict], path: Path, sizes: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    judges = list(dict.fromkeys(r["judge"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for judge, colour in zip(judges, plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        for name, style in (("corrected", "-"), ("human_only", ":"), ("judge_only", "--")):
            sel = sorted((r for r in rows if r["judge"] == judge and r["estimator"] == name), key=lambda r: r["n"])
            if name == "human_only" and judge != judges[0]:
                continue  # human-only does not depend on the judge
            label = f"{judge} {name}" if name != "human_only" else "human-only"
            ns = [r["n"] for r in sel]
            c = "black" if name == "human_only" else colour
            axes[0].plot(ns, [100 * r["coverage"] for r in sel], style, color=c, label=label, marker="o", ms=3)
            axes[1].plot(ns, [r["width"] for r in sel], style, color=c, marker="o", ms=3)
            axes[2].plot(ns, [r["bias"] for r in sel], style, color=c, marker="o", ms=3)
    axes[0].axhspan(93, 97, color="0.9")
    axes[0].set_ylim(0, 100)
    for ax, title in zip(axes, ("CI coverage of the true score (%)", "mean 95% CI width (points)",
                                "mean bias (points)")):
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.set_xlabel("human-graded responses per system")
        ax.set_title(title)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--sizes", default="25,50,100,200,400")
    ap.add_argument("--out", type=Path, default=Path("results/bench_correction"))
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    started = time.perf_counter()
    pop = population_truth()
    runs = [one_seed(seed, args.questions, sizes) for seed in range(args.seeds)]
    judges = [j.name for j in standard_judges()]
    rows = summarise(runs, pop, judges, sizes)
    result = {"seeds": args.seeds, "questions": args.questions, "sizes": sizes, "population_truth": pop.tolist(),
              "targets": targets(rows), "first_n_exact_ranking_90pct": first_n_ranking(rows), "rows": rows,
              "seconds": time.perf_counter() - started}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    figure(rows, args.out.with_suffix(".png"), sizes)
    print(markdown(rows))
    print(json.dumps({k: result[k] for k in ("targets", "first_n_exact_ranking_90pct", "seconds")}, indent=2))


if __name__ == "__main__":
    main()
