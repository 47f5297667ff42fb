"""`gamut-local report RUN_DIR`: report.md, figures/*.png and tables/*.csv|json for a run.

Needs only the verdict files (`verdicts/<judge>/*.jsonl`); answers are not read. Every
section that cannot be computed from what is there (one judge only, no model in both
variants, no dataset for domains) is listed in the report with the reason.

`report_tables` is the computation (pure numpy on a Panel, what the benchmark times);
`write_report` reads the run directory, calls it, and writes the files.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from gamut_local.analysis import stats
from gamut_local.analysis.agreement import (
    Panel,
    agree_panel,
    neighbour_tests,
    panel_from_records,
    response_scores,
    system_scores,
    variant_comparison,
)
from gamut_local.analysis.metrics import VerdictTable, bootstrap_weights, score_table
from gamut_local.errors import InputError, Problem
from gamut_local.rundir.store import write_json, write_text_atomic
from gamut_local.vocab import TIERS, VERDICTS

N_BOOT = 1000


def _system_labels(systems: list[tuple[str, str]]) -> list[str]:
    """`model` alone when the run has one variant, else `model (mm)` / `model (text)`."""
    if len({v for _, v in systems}) <= 1:
        return [m for m, _ in systems]
    short = {"multimodal": "mm", "text_only": "text"}
    return [f"{m} ({short.get(v, v)})" for m, v in systems]


def _panel_table(panel: Panel) -> VerdictTable:
    """The Panel as a `metrics.VerdictTable` (one response per judge, system, question)."""
    R = panel.n_responses
    jj, uu = np.nonzero(panel.verdict >= 0)
    resp = jj * R + panel.key_response[uu]
    used = np.zeros(len(panel.judges) * R, dtype=bool)
    used[resp] = True
    remap = np.cumsum(used) - 1
    Q = len(panel.questions)
    responses = [(panel.judges[i // R], *panel.systems[(i % R) // Q], panel.questions[i % Q])
                 for i in np.flatnonzero(used).tolist()]
    return VerdictTable(panel.verdict[jj, uu], panel.key_tier[uu], remap[resp], responses)


def report_tables(panel: Panel, domains: dict[str, str] | None = None, *, seed: int = 0,
                  n_boot: int = N_BOOT) -> dict:
    """Every table of the report, computed from an aligned Panel.

    `missing` lists, as sentences, what could not be computed and why.
    """
    missing: list[str] = []
    labels = _system_labels(panel.systems)
    scored = score_table(_panel_table(panel), domains, seed=seed, n_boot=n_boot, responses=False)
    by_key = {(m["judge"], m["model"], m["variant"]): m for m in scored["models"]}
    # Same seed and question set as score_table, so the paired tests use the very
    # resamples behind the leaderboard's CIs.
    weights = bootstrap_weights(len(panel.questions), n_boot, seed).astype(np.float64)

    leaderboard, tiers, verdicts, neighbours, variants, judge_scores = [], [], [], [], {}, {}
    for j, judge in enumerate(panel.judges):
        by_q = response_scores(panel, j)
        scores = system_scores(by_q)
        judge_scores[judge] = scores
        boot = 100.0 * stats.bootstrap_means(weights, by_q.T)
        unscored = [labels[i] for i in np.flatnonzero(~np.isfinite(scores))]
        if unscored:
            missing.append(f"Judge `{judge}` graded no response of {', '.join(unscored)}; "
                           "left out of its leaderboard.")
        order = [i for i in np.lexsort((np.arange(len(scores)), -scores)) if np.isfinite(scores[i])]
        for rank, i in enumerate(order, start=1):
            m = by_key[(judge, *panel.systems[i])]
            base = {"judge": judge, "model": panel.systems[i][0], "variant": panel.systems[i][1],
                    "label": labels[i]}
            leaderboard.append({**base, "rank": rank, "gamut_score": m["gamut_score"],
                                "ci95_low": m["ci95"][0], "ci95_high": m["ci95"][1],
                                "n_responses": m["n_responses"]})
            tiers.append({**base, **m["tier_scores"]})
            verdicts.append({**base, **m["verdict_rates"]})
        for row in neighbour_tests(labels, scores, boot):
            neighbours.append({"judge": judge, **row})
        variants[judge] = variant_comparison(panel.systems, scores)
        for key, why in variants[judge]["notes"].items():
            missing.append(f"Variant comparison, judge `{judge}`, {key}: {why}.")

    if len(panel.judges) >= 2:
        agreement = agree_panel(panel)
        for key, why in agreement["notes"].items():
            missing.append(f"Agreement {key}: {why}.")
        if "gold" not in panel.judges:
            missing.append("Calibration against gold: no judge named `gold` in the run, so "
                           "no judge is compared with human verdicts.")
    else:
        agreement = None
        missing.append(f"Judge agreement: the run has one judge (`{panel.judges[0]}`); "
                       "agreement needs at least two.")

    if domains is None:
        domain_rows = None
    else:
        domain_rows = [{**d, "label": labels[panel.systems.index((d["model"], d["variant"]))]}
                       for d in scored["domains"]]
        if any(d["domain"] == "unknown" for d in domain_rows):
            missing.append("Some questions in the verdicts are not in the dataset; their "
                           "responses are grouped under domain `unknown`.")

    return {
        "judges": panel.judges,
        "systems": [{"model": m, "variant": v, "label": lab} for (m, v), lab in zip(panel.systems, labels)],
        "n_questions": len(panel.questions),
        "n_verdicts": {j: int((panel.verdict[i] >= 0).sum()) for i, j in enumerate(panel.judges)},
        "leaderboard": leaderboard,
        "tiers": tiers,
        "verdicts": verdicts,
        "neighbours": neighbours,
        "variants": variants,
        "judge_scores": [{"model": m, "variant": v, "label": lab,
                          **{j: (None if not np.isfinite(judge_scores[j][i]) else round(float(judge_scores[j][i]), 2))
                             for j in panel.judges}}
                         for i, ((m, v), lab) in enumerate(zip(panel.systems, labels))],
        "agreement": agreement,
        "domains": domain_rows,
        "missing": missing,
    }


# ---------------------------------------------------------------- reading the run directory

def _manifest(run_dir: Path) -> dict | None:
    path = run_dir / "manifest.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError([Problem(str(path), None, "", f"not valid JSON: {e}")])
    if not isinstance(data, dict):
        raise InputError([Problem(str(path), None, "", "expected a JSON object")])
    return data


def _from_manifest(manifest: dict, key: str):
    """A field of the run config the manifest records (`config.<key>`), or top-level."""
    for holder in (manifest.get("config"), manifest):
        if isinstance(holder, dict) and key in holder:
            return holder[key]
    return None


def _locate(ref: str, run_dir: Path) -> Path | None:
    # Run configs resolve paths to absolute ones; relative ones are tried from the run
    # directory, then from where the command runs.
    for cand in (Path(ref), run_dir / ref, Path.cwd() / ref):
        if cand.is_file():
            return cand
    return None


def _dataset_for(run_dir: Path, dataset: Path | None, manifest: dict | None) -> tuple[Path | None, str | None]:
    """The dataset to take domains from, or None and the reason there is none."""
    if dataset is not None:
        return Path(dataset), None
    if manifest is None:
        return None, "no dataset was given and the run directory has no manifest.json naming one"
    ref = _from_manifest(manifest, "dataset")
    if not isinstance(ref, str):
        return None, "no dataset was given and manifest.json names none"
    path = _locate(ref, run_dir)
    if path is None:
        return None, f"manifest.json names dataset {ref}, which is not readable from here"
    return path, None


def read_run(run_dir: Path, dataset: Path | None = None) -> tuple[Panel, dict | None, list[str]]:
    """The run's verdicts as a Panel, its domains (or None) and notes on what is absent.

    Verdicts are `verdicts/<judge>/*.jsonl` (shards included) plus the run's
    `extra_verdicts` that manifest.json records (e.g. the sample's gold verdicts).
    """
    from gamut_local.data.dataset import load_questions
    from gamut_local.data.records import Verdict, load_records, verdict_key

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError([Problem(str(run_dir), None, "", "run directory not found")])
    notes = []
    manifest = _manifest(run_dir)
    files = sorted((run_dir / "verdicts").glob("*/*.jsonl"))
    extra = _from_manifest(manifest, "extra_verdicts") if manifest else None
    for ref in extra if isinstance(extra, list) else []:
        path = _locate(str(ref), run_dir)
        if path is None:
            notes.append(f"Verdicts: manifest.json lists extra verdict file {ref}, which is not "
                         "readable from here; its judge's verdicts are not in this report.")
        elif path.resolve() not in {f.resolve() for f in files}:
            files.append(path)
    if not files:
        raise InputError([Problem(str(run_dir / "verdicts"), None, "",
                                  "no verdict files: expected verdicts/<judge>/<model>.<variant>.jsonl")])
    records = load_records(files, Verdict, verdict_key)
    panel = panel_from_records(records, source=str(run_dir / "verdicts"))
    path, why = _dataset_for(run_dir, dataset, manifest)
    domains = None
    if path is None:
        notes.append(f"Per-domain table: {why}.")
    else:
        domains = {q.question_id: q.domain for q in load_questions(path, check_images=False)}
    return panel, domains, notes


# ---------------------------------------------------------------- writing

def _csv(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    write_text_atomic(path, buf.getvalue())


def _fmt(x, digits=1) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _md_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _markdown(run_dir: Path, t: dict, figures: dict[str, str], extra_missing: list[str]) -> str:
    out = [f"# GAMUT report: `{run_dir.name}`", ""]
    nv = ", ".join(f"`{j}` {n:,}" for j, n in t["n_verdicts"].items())
    out += [f"Judges: {len(t['judges'])} ({nv} verdicts). Models: {len(t['systems'])} "
            f"(model, variant) pairs. Questions: {t['n_questions']}. Scores are GAMUT points "
            "(100 x mean response score, in [-100, 100]); 95% CIs are percentile bootstraps over "
            f"questions ({N_BOOT} resamples, seeded).", ""]

    out += ["## Leaderboard", ""]
    nb = {(r["judge"], r["higher"]): r for r in t["neighbours"]}
    for judge in t["judges"]:
        rows = [r for r in t["leaderboard"] if r["judge"] == judge]
        table = []
        for r in rows:
            n = nb.get((judge, r["label"]))
            gap = "" if n is None else (
                f"{_fmt(n['diff'])} [{_fmt(n['ci95'][0])}, {_fmt(n['ci95'][1])}] "
                + ("yes" if n["distinguishable"] else "no" if n["distinguishable"] is not None else n["note"]))
            table.append([r["rank"], r["label"], _fmt(r["gamut_score"]),
                          f"[{_fmt(r['ci95_low'])}, {_fmt(r['ci95_high'])}]", r["n_responses"], gap])
        out += [f"Judge `{judge}`:", "",
                _md_table(["#", "model", "GAMUT", "95% CI", "responses",
                           "gap to next [paired 95% CI] distinguishable?"], table), ""]
    out += ["The last column is a paired bootstrap over questions between each model and the "
            "next one down: `yes` when the 95% CI of the difference excludes zero.", ""]
    if "leaderboard" in figures:
        out += [f"![leaderboard]({figures['leaderboard']})", ""]

    out += ["## Tier scores", ""]
    out += [_md_table(["judge", "model"] + list(TIERS),
                      [[r["judge"], r["label"]] + [_fmt(r[tr]) for tr in TIERS] for r in t["tiers"]]), ""]
    if "tiers" in figures:
        out += [f"![tier scores]({figures['tiers']})", ""]

    out += ["## Verdict distribution: omission vs contradiction", ""]
    vrows = []
    for r in t["verdicts"]:
        ratio = (r["missing"] / r["contradicts"]) if r["contradicts"] else None
        vrows.append([r["judge"], r["label"]] + [f"{100 * r[v]:.1f}%" for v in VERDICTS]
                     + ["—" if ratio is None else f"{ratio:.1f}"])
    out += [_md_table(["judge", "model"] + list(VERDICTS) + ["missing : contradicts"], vrows), ""]
    if "verdicts" in figures:
        out += [f"![verdict distribution]({figures['verdicts']})", ""]

    out += ["## Per-domain scores", ""]
    if t["domains"] is None:
        out += ["Not computed (see the last section).", ""]
    else:
        doms = sorted({d["domain"] for d in t["domains"]})
        cell = {(d["judge"], d["label"], d["domain"]): d for d in t["domains"]}
        rows = []
        for r in t["leaderboard"]:
            rows.append([r["judge"], r["label"]] + [
                _fmt(cell[(r["judge"], r["label"], d)]["gamut_score"]) if (r["judge"], r["label"], d) in cell
                else "—" for d in doms])
        out += [_md_table(["judge", "model"] + doms, rows), ""]
        if "domains" in figures:
            out += [f"![per-domain scores]({figures['domains']})", ""]

    out += ["## Judge agreement", ""]
    a = t["agreement"]
    if a is None:
        out += ["Not computed (see the last section).", ""]
    else:
        miss = ", ".join(f"`{j}` {n:,}" for j, n in a["keys"]["missing"].items())
        out += [f"Verdicts aligned on {a['keys']['total']:,} (question, model, variant, check) keys; "
                f"{a['keys']['graded_by_all']:,} graded by every judge; keys each judge lacks: {miss}.", ""]
        out += [_md_table(["judge a", "judge b", "Kendall τ-b", "Spearman ρ", "same ranking",
                           "adjacent swaps", "mean diff (b − a)", "max abs diff", "Cohen κ"],
                          [[p["judge_a"], p["judge_b"], _fmt(p["kendall_tau_b"], 3), _fmt(p["spearman_rho"], 3),
                            {True: "yes", False: "no", None: "—"}[p["identical_ranking"]],
                            "—" if p["adjacent_swaps"] is None else p["adjacent_swaps"], _fmt(p["mean_diff"], 2),
                            _fmt(p["max_abs_diff"], 2), _fmt(p["cohen_kappa"], 3)] for p in a["pairs"]]), ""]
        ka = a["krippendorff_alpha"]
        out += [f"Krippendorff's alpha across all judges: nominal {_fmt(ka['nominal'], 3)}, "
                f"ordinal {_fmt(ka['ordinal'], 3)} (contradicts < missing < partially_meets < meets; "
                "invalid counted as missing data).", ""]
        if a["vs_gold"]:
            out += ["Calibration against human (`gold`) verdicts:", "",
                    _md_table(["judge", "accuracy", "Cohen κ", "score bias (judge − gold)"],
                              [[j, _fmt(g["accuracy"], 3), _fmt(g["cohen_kappa"], 3), _fmt(g["score_bias"], 2)]
                               for j, g in a["vs_gold"].items()]), ""]
        for key in ("judge_scatter", "confusion"):
            if key in figures:
                out += [f"![{key}]({figures[key]})", ""]

    out += ["## Text-only vs multimodal", ""]
    any_variant = False
    for judge, v in t["variants"].items():
        if not v["n_models"]:
            continue
        any_variant = True
        out += [f"Judge `{judge}`: mean gain (text_only − multimodal) {_fmt(v['mean_gain'], 2)} points; "
                f"Pearson r(multimodal score, gain) {_fmt(v['pearson_r_multimodal_gain'], 3)}; "
                f"Kendall τ-b between the two rankings {_fmt(v['kendall_tau_b_rankings'], 3)}.", "",
                _md_table(["model", "multimodal", "text_only", "gain"],
                          [[m["model"], _fmt(m["multimodal"]), _fmt(m["text_only"]), _fmt(m["gain"])]
                           for m in v["models"]]), ""]
    if any_variant and "variants" in figures:
        out += [f"![text-only vs multimodal]({figures['variants']})", ""]
    if not any_variant:
        out += ["Not computed (see the last section).", ""]

    out += ["## What this report could not compute", ""]
    items = extra_missing + t["missing"]
    out += ([f"- {m}" for m in items] if items else ["Nothing: every section was computed."]) + [""]
    return "\n".join(out)


def write_report(run_dir: Path, dataset: Path | None = None, *, seed: int = 0) -> Path:
    """Write report.md, figures/ and tables/ into the run directory; return report.md's path."""
    from gamut_local.reporting.figures import draw_all

    run_dir = Path(run_dir)
    panel, domains, notes = read_run(run_dir, dataset)
    t = report_tables(panel, domains, seed=seed)
    tables = run_dir / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    _csv(tables / "leaderboard.csv", t["leaderboard"])
    _csv(tables / "tiers.csv", t["tiers"])
    _csv(tables / "verdicts.csv", t["verdicts"])
    _csv(tables / "neighbours.csv", [
        {**{k: v for k, v in r.items() if k != "ci95"}, "ci95_low": r["ci95"][0], "ci95_high": r["ci95"][1]}
        for r in t["neighbours"]])
    _csv(tables / "judge_scores.csv", t["judge_scores"])
    if t["domains"] is not None:
        _csv(tables / "domains.csv", t["domains"])
    _csv(tables / "variants.csv", [{"judge": j, **m} for j, v in t["variants"].items() for m in v["models"]])
    write_json(tables / "variants.json", t["variants"])
    if t["agreement"] is not None:
        write_json(tables / "agreement.json", t["agreement"])
    write_json(tables / "report.json", {**t, "missing": notes + t["missing"]})
    figures = draw_all(t, run_dir / "figures")
    report = run_dir / "report.md"
    write_text_atomic(report, _markdown(run_dir, t, {k: str(p.relative_to(run_dir)) for k, p in figures.items()},
                                        notes))
    return report
