"""The report's corrected-scores section: per model judge and system, the judge-only score, the
PPI++ corrected score and the human-only estimate with their 95% CIs, and the judge's bias
(`analysis.correction`; the numbers are `scores.json`'s `corrected` fields), as a table,
`tables/corrected.csv` and `figures/corrected.png`; where a team graded the sample, the
agreement between the people beside them (`agreement_lines`).
"""

from __future__ import annotations

from pathlib import Path

from gamut_local.analysis.correction import rank_list
from gamut_local.reporting.gold import checked_sample, jury_records, with_team  # noqa: F401 (re-exported)
from gamut_local.reporting.markdown import fmt, md_table
from gamut_local.reporting.tables import write_csv

FIGURE = "corrected.png"
RANKING_FIGURE = "corrected-differences.png"


def rows(doc: dict) -> list[dict]:
    """One flat row per model judge and system that has a `corrected` block."""
    out = []
    for m in doc["models"]:
        c = m.get("corrected")
        if c is None:
            continue
        out.append({"judge": m["judge"], "model": m["model"], "variant": m["variant"],
                    "gamut_score": m["gamut_score"], "ci95_low": m["ci95"][0], "ci95_high": m["ci95"][1],
                    **{k: v for k, v in c.items() if k not in ("judge", "tiers")}})
    return out


def _interval(lo, hi) -> str:
    return f"[{fmt(lo)}, {fmt(hi)}]"


def section(doc: dict, run_dir: Path) -> str:
    """The Markdown section (empty without a correction); writes its CSV and figure."""
    info = doc.get("correction")
    if info is None:
        return ""
    flat = rows(doc)
    write_csv(Path(run_dir) / "tables" / "corrected.csv", flat)
    figure = draw(flat, Path(run_dir) / "figures" / FIGURE)
    lines = ["## Corrected scores", "",
             f"Each model judge's scores corrected by `{'`, `'.join(info['gold_judges'])}` on the random "
             f"sample `{info['sample_id']}` (per {info['per']}): prediction-powered inference with power "
             "tuning (PPI++), unbiased for the score those humans would give whatever the judge's errors. "
             "Human-only: the same humans' mean on the same responses. Bias: judge-only − corrected.", ""]
    lines += [f"> **Note:** {n}" for n in info.get("notes") or []] + ([""] if info.get("notes") else [])
    table = [[r["judge"], f"{r['model']} ({r['variant']})", fmt(r["judge_only"]),
              fmt(r["score"]) + " " + _interval(r["ci_low"], r["ci_high"]) if r["score"] is not None else "—",
              fmt(r["human_only"]) + " " + _interval(r["human_only_ci_low"], r["human_only_ci_high"])
              if r["human_only"] is not None else "—",
              f"{r['n_labeled']} / {r['n_total']}", fmt(r["bias"]), r["reason"] or ""] for r in flat]
    lines += [md_table(["judge", "model", "judge-only", "corrected [95% CI]", "human-only [95% CI]",
                        "labeled / total", "bias", "note"], table), ""]
    if figure is not None:
        lines += [f"![corrected scores](figures/{FIGURE})", ""]
    lines += agreement_lines(info, Path(run_dir))
    lines += _ranking_lines(doc, flat, Path(run_dir))
    return "\n".join(lines) + "\n"


def agreement_lines(info: dict, out_dir: Path) -> list[str]:
    """The agreement between the people whose labels the correction stands on, where a team
    graded this sample with an overlap (`reporting.team.team_agreement` of the run the sample
    file lies in; also written to `tables/human_agreement.json` under `out_dir`), with a
    warning where a model judge agrees with the people more than they agree with each other."""
    from gamut_local.reporting.team import team_agreement
    from gamut_local.rundir.store import write_json

    run = Path(info["sample_file"]).parent.parent  # RUN/samples/NAME.json
    got = team_agreement(run) if (run / "team").is_dir() else None
    if got is None or got["sample_id"] != info["sample_id"]:
        return []
    write_json(out_dir / "tables" / "human_agreement.json", got)
    alpha = got["krippendorff_alpha"]
    lines = ["### Agreement between people", "",
             f"On the overlap of the team's assignment: {got['overlap_responses']} responses assigned to two people "
             f"({got['overlap']:g} of the sample), {got['overlap_graded']} graded by both. Krippendorff's α over "
             f"{got['n_cells']} cells: nominal {fmt(alpha['nominal'], 3)}, ordinal {fmt(alpha['ordinal'], 3)}; "
             f"{got['disagreements']} cells disagree, {got['unadjudicated']} not adjudicated yet (those take the "
             "first-assigned annotator's label).", ""]
    if got["pairs"]:
        lines += [md_table(["annotators", "cells", "agreement", "Cohen's κ"], [
            [f"{p['a']} – {p['b']}", str(p["n"]), fmt(p["agreement"], 3), fmt(p["cohen_kappa"], 3)]
            for p in got["pairs"]]), ""]
    if got["judge_vs_people"]:
        lines += [md_table(["model judge", "mean κ with each person (same cells)"], [
            [j, fmt(k, 3)] for j, k in got["judge_vs_people"].items()]), ""]
    if got["noisier_truth"]:
        lines += [f"> **Warning:** {', '.join(f'`{j}`' for j in got['noisier_truth'])} agree"
                  f"{'s' if len(got['noisier_truth']) == 1 else ''} with the people more than the people agree "
                  f"with each other (mean pairwise κ {fmt(got['people_kappa'], 3)}): the \"truth\" the corrected "
                  "scores stand on is the noisier party. Adjudicate the disagreements, sharpen the grading "
                  "guidelines, or read the corrected scores as one person's view.", ""]
    lines += [f"- null {k}: {why}" for k, why in got["notes"].items()] + ([""] if got["notes"] else [])
    return lines


def _ranking_lines(doc: dict, flat: list[dict], run_dir: Path) -> list[str]:
    """The ranking the corrected differences imply, with rank intervals, and every pair's
    corrected difference with its CI (table and figure)."""
    diffs = doc["correction"]["differences"]
    ranks = {(r["judge"], r["model"], r["variant"]): (r["rank_best"], r["rank_worst"])
             for r in doc["correction"].get("ranking") or rank_list(flat, diffs)}
    if not ranks:
        return []
    shown = sorted((r for r in flat if r["score"] is not None), key=lambda r: (r["judge"], -r["score"]))
    lines = ["### Corrected ranking", "",
             "Ranked by corrected score; a rank interval spans the ranks the corrected differences (below) "
             f"leave open: a system is placed above another only where their difference's 95% CI excludes 0 "
             f"({'paired: the sample is shared' if doc['correction']['per'] == 'shared' else 'unpaired: each system its own sample'}).",
             "", md_table(["judge", "model", "corrected", "rank"], [
                 [r["judge"], f"{r['model']} ({r['variant']})", fmt(r["score"]),
                  _rank(ranks[(r["judge"], r["model"], r["variant"])])] for r in shown]), ""]
    usable = [d for d in diffs if d["score"] is not None]
    write_csv(run_dir / "tables" / "corrected_differences.csv",
              [{"judge": d["judge"], "a_model": d["a"][0], "a_variant": d["a"][1], "b_model": d["b"][0],
                "b_variant": d["b"][1], **{k: v for k, v in d.items() if k not in ("judge", "a", "b")}} for d in diffs])
    if usable:
        lines += [md_table(["judge", "a − b", "corrected [95% CI]", "human-only [95% CI]", "judge-only", "method"], [
            [d["judge"], f"{d['a'][0]} ({d['a'][1]}) − {d['b'][0]} ({d['b'][1]})",
             f"{fmt(d['score'])} {_interval(d['ci_low'], d['ci_high'])}",
             f"{fmt(d['human_only'])} {_interval(d['human_only_ci_low'], d['human_only_ci_high'])}",
             fmt(d["judge_only"]), d["method"]] for d in usable]), ""]
        draw_differences(usable, run_dir / "figures" / RANKING_FIGURE)
        lines += [f"![corrected differences](figures/{RANKING_FIGURE})", ""]
    return lines


def _rank(interval: tuple[int, int]) -> str:
    lo, hi = interval
    return str(lo) if lo == hi else f"{lo}–{hi}"


def draw_differences(diffs: list[dict], path: Path) -> Path:
    """Per judge, each pair's corrected difference with its 95% CI, and 0 marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gamut_local.reporting.figures import save_figure

    judges = list(dict.fromkeys(d["judge"] for d in diffs))
    most = max(sum(d["judge"] == j for d in diffs) for j in judges)
    fig, axes = plt.subplots(1, len(judges), figsize=(5.5 * len(judges), 1 + 0.4 * most), squeeze=False)
    for ax, judge in zip(axes[0], judges):
        mine = [d for d in diffs if d["judge"] == judge]
        y = range(len(mine))
        err = [[d["score"] - d["ci_low"] for d in mine], [d["ci_high"] - d["score"] for d in mine]]
        colours = ["#1565c0" if d["ci_low"] > 0 or d["ci_high"] < 0 else "#9e9e9e" for d in mine]
        for i, d in enumerate(mine):  # blue: the interval excludes 0, the pair is ordered
            ax.errorbar([d["score"]], [i], xerr=[[err[0][i]], [err[1][i]]], fmt="o", ms=4, capsize=3,
                        color=colours[i])
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(list(y), [f"{d['a'][0]} − {d['b'][0]}" for d in mine], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("corrected difference, GAMUT points (95% CI)")
        ax.set_title(f"judge {judge}", fontsize=10)
    return save_figure(fig, path)


def draw(flat: list[dict], path: Path) -> Path | None:
    """Per judge, per system: judge-only, corrected and human-only, each with its 95% CI."""
    shown = [r for r in flat if r["score"] is not None]
    if not shown:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gamut_local.reporting.figures import save_figure

    judges = list(dict.fromkeys(r["judge"] for r in shown))
    fig, axes = plt.subplots(1, len(judges), figsize=(5.5 * len(judges), 0.5 + 0.55 * len(shown) / len(judges) + 1),
                             squeeze=False)
    series = (("judge-only", "gamut_score", "ci95_low", "ci95_high", "#9e9e9e"),
              ("corrected", "score", "ci_low", "ci_high", "#1565c0"),
              ("human-only", "human_only", "human_only_ci_low", "human_only_ci_high", "#ef6c00"))
    for ax, judge in zip(axes[0], judges):
        mine = [r for r in shown if r["judge"] == judge]
        for k, (name, point, lo, hi, colour) in enumerate(series):
            y = [i + (k - 1) * 0.22 for i in range(len(mine))]
            x = [r[point] for r in mine]
            err = [[r[point] - r[lo] for r in mine], [r[hi] - r[point] for r in mine]]
            ax.errorbar(x, y, xerr=err, fmt="o", ms=4, capsize=3, color=colour, label=name)
        ax.set_yticks(range(len(mine)), [f"{r['model']} ({r['variant']})" for r in mine], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("GAMUT points")
        ax.set_title(f"judge {judge}", fontsize=10)
        ax.legend(fontsize=7, loc="best")
    return save_figure(fig, path)
