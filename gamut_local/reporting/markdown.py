"""report.md from the report's tables (`analysis.summary.report_tables`): one small renderer
per section, put together by `render`. The only place numbers are rounded (`fmt`), because
this is what people read; the data files beside it keep full precision.
"""

from __future__ import annotations

from gamut_local.vocab import TIERS, VERDICTS


def fmt(x, digits: int = 1) -> str:
    """A number for people: fixed decimals, `—` where there is none."""
    return "—" if x is None else f"{x:.{digits}f}"


def md_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _figure(figures: dict[str, str], key: str, alt: str) -> list[str]:
    return [f"![{alt}]({figures[key]})", ""] if key in figures else []


def header(run_name: str, tables: dict, n_boot: int) -> list[str]:
    nv = ", ".join(f"`{j}` {n:,}" for j, n in tables["n_verdicts"].items())
    return [f"# GAMUT report: `{run_name}`", ""] + coverage(tables) + [
            f"Judges: {len(tables['judges'])} ({nv} verdicts). Models: {len(tables['systems'])} "
            f"(model, variant) pairs. Questions: {tables['n_questions']}. Scores are GAMUT points "
            "(100 x mean response score, in [-100, 100]); 95% CIs are percentile bootstraps over "
            f"questions ({n_boot} resamples, seeded).", ""]


def coverage(tables: dict) -> list[str]:
    """A pilot's and an incomplete run's warnings, first thing in the report."""
    out = []
    if tables.get("pilot"):
        out += [f"> **Pilot run** (`--limit {tables['pilot']}`): only the first {tables['pilot']} questions "
                "(by question_id) were answered and judged. Its scores are not comparable with a full "
                "run's.", ""]
    gaps = tables.get("incomplete") or []
    if gaps:
        out += ["> **Incomplete:** some systems lack verdicts on the expected grid (questions x checks "
                f"{'of the dataset' if tables.get('coverage_from') == 'dataset' else 'the verdicts imply; no dataset was given'}"
                "). Each judge's leaderboard, neighbour tests and variant comparison use only the "
                "questions every one of its systems has complete (the `questions` column); systems "
                "marked `*` are incomplete:", ">"] + [f"> - {g}" for g in gaps] + [""]
    if tables.get("coverage_from") == "verdicts":
        out += ["Coverage was judged without the dataset: the expected checks are those the verdicts "
                "themselves show for each question and variant.", ""]
    return out


def _gap(n: dict | None) -> str:
    if n is None:
        return ""
    verdict = "yes" if n["distinguishable"] else "no" if n["distinguishable"] is not None else n["note"]
    return f"{fmt(n['diff'])} [{fmt(n['ci95'][0])}, {fmt(n['ci95'][1])}] {verdict}"


def leaderboard(tables: dict, figures: dict[str, str]) -> list[str]:
    out = ["## Leaderboard", ""]
    nb = {(r["judge"], r["higher"]): r for r in tables["neighbours"]}
    for judge in tables["judges"]:
        rows = [[r["rank"] or "—", r["label"] + ("" if r.get("complete", True) else " *"), fmt(r["gamut_score"]),
                 f"[{fmt(r['ci95_low'])}, {fmt(r['ci95_high'])}]", r["n_responses"], r.get("n_questions", "—"),
                 _gap(nb.get((judge, r["label"])))]
                for r in tables["leaderboard"] if r["judge"] == judge]
        out += [f"Judge `{judge}`:", "",
                md_table(["#", "model", "GAMUT", "95% CI", "responses", "questions",
                          "gap to next [paired 95% CI] distinguishable?"], rows), ""]
    out += ["The last column is a paired bootstrap over questions between each model and the "
            "next one down: `yes` when the 95% CI of the difference excludes zero. `questions`: the "
            "questions every model of that judge has complete, which the scores and tests use; "
            "`*`: an incomplete model.", ""]
    return out + _figure(figures, "leaderboard", "leaderboard")


def tiers(tables: dict, figures: dict[str, str]) -> list[str]:
    rows = [[r["judge"], r["label"]] + [fmt(r[tier]) for tier in TIERS] for r in tables["tiers"]]
    return ["## Tier scores", "", md_table(["judge", "model"] + list(TIERS), rows), ""] + \
        _figure(figures, "tiers", "tier scores")


def verdicts(tables: dict, figures: dict[str, str]) -> list[str]:
    rows = []
    for r in tables["verdicts"]:
        ratio = (r["missing"] / r["contradicts"]) if r["contradicts"] else None
        rows.append([r["judge"], r["label"]] + [f"{100 * r[v]:.1f}%" for v in VERDICTS] + [fmt(ratio)])
    return ["## Verdict distribution: omission vs contradiction", "",
            md_table(["judge", "model"] + list(VERDICTS) + ["missing : contradicts"], rows), ""] + \
        _figure(figures, "verdicts", "verdict distribution")


def domains(tables: dict, figures: dict[str, str]) -> list[str]:
    out = ["## Per-domain scores", ""]
    if tables["domains"] is None:
        return out + ["Not computed (see the last section).", ""]
    names = sorted({d["domain"] for d in tables["domains"]})
    cell = {(d["judge"], d["label"], d["domain"]): d["gamut_score"] for d in tables["domains"]}
    rows = [[r["judge"], r["label"]] + [fmt(cell.get((r["judge"], r["label"], d))) for d in names]
            for r in tables["leaderboard"]]
    return out + [md_table(["judge", "model"] + names, rows), ""] + \
        _figure(figures, "domains", "per-domain scores")


def _pair_row(p: dict) -> list:
    return [p["judge_a"], p["judge_b"], p.get("n_questions", "—"), fmt(p["kendall_tau_b"], 3), fmt(p["spearman_rho"], 3),
            {True: "yes", False: "no", None: "—"}[p["identical_ranking"]],
            "—" if p["adjacent_swaps"] is None else p["adjacent_swaps"], fmt(p["mean_diff"], 2),
            fmt(p["max_abs_diff"], 2), fmt(p["cohen_kappa"], 3)]


def agreement(tables: dict, figures: dict[str, str]) -> list[str]:
    out = ["## Judge agreement", ""]
    a = tables["agreement"]
    if a is None:
        return out + ["Not computed (see the last section).", ""]
    miss = ", ".join(f"`{j}` {n:,}" for j, n in a["keys"]["missing"].items())
    out += [f"Verdicts aligned on {a['keys']['total']:,} (question, model, variant, check) keys; "
            f"{a['keys']['graded_by_all']:,} graded by every judge; keys each judge lacks: {miss}.", "",
            md_table(["judge a", "judge b", "questions", "Kendall τ-b", "Spearman ρ", "same ranking", "adjacent swaps",
                      "mean diff (b − a)", "max abs diff", "Cohen κ"], [_pair_row(p) for p in a["pairs"]]), ""]
    ka = a["krippendorff_alpha"]
    out += [f"Krippendorff's alpha across all judges: nominal {fmt(ka['nominal'], 3)}, "
            f"ordinal {fmt(ka['ordinal'], 3)} (contradicts < missing < partially_meets < meets; "
            "invalid counted as missing data).", ""]
    if a["vs_gold"]:
        out += ["Calibration against human (`gold`) verdicts:", "",
                md_table(["judge", "accuracy", "Cohen κ", "score bias (judge − gold)"],
                         [[j, fmt(g["accuracy"], 3), fmt(g["cohen_kappa"], 3), fmt(g["score_bias"], 2)]
                          for j, g in a["vs_gold"].items()]), ""]
    return out + _figure(figures, "judge_scatter", "judge_scatter") + _figure(figures, "confusion", "confusion")


def variants(tables: dict, figures: dict[str, str]) -> list[str]:
    out = ["## Text-only vs multimodal", ""]
    shown = {judge: v for judge, v in tables["variants"].items() if v["n_models"]}
    for judge, v in shown.items():
        out += [f"Judge `{judge}`: mean gain (text_only − multimodal) {fmt(v['mean_gain'], 2)} points; "
                f"Pearson r(multimodal score, gain) {fmt(v['pearson_r_multimodal_gain'], 3)}; "
                f"Kendall τ-b between the two rankings {fmt(v['kendall_tau_b_rankings'], 3)}.", "",
                md_table(["model", "multimodal", "text_only", "gain"],
                         [[m["model"], fmt(m["multimodal"]), fmt(m["text_only"]), fmt(m["gain"])]
                          for m in v["models"]]), ""]
    if not shown:
        return out + ["Not computed (see the last section).", ""]
    return out + _figure(figures, "variants", "text-only vs multimodal")


def not_computed(items: list[str]) -> list[str]:
    return ["## What this report could not compute", ""] + \
        ([f"- {m}" for m in items] if items else ["Nothing: every section was computed."]) + [""]


def render(run_name: str, tables: dict, figures: dict[str, str], notes: list[str], n_boot: int) -> str:
    """The whole report.md: `figures` maps a figure's key to its path relative to report.md;
    `notes` are the run directory's own gaps (listed before the tables')."""
    sections = [header(run_name, tables, n_boot)]
    sections += [fn(tables, figures) for fn in (leaderboard, tiers, verdicts, domains, agreement, variants)]
    sections.append(not_computed(notes + tables["missing"]))
    return "\n".join(line for section in sections for line in section)
