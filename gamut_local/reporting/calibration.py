"""Calibration against human verdicts, for people: the reliability diagram (PNG) and the
report's Markdown section, from `analysis.calibration.calibrate` output; `calibration_files`
reads verdict files and writes `calibration.json` + `reliability.png` (what `agree --gold` adds).
"""

from __future__ import annotations

from pathlib import Path

from gamut_local.analysis.calibration import calibrate_table
from gamut_local.rundir.human import is_human


def reliability_diagram(cal: dict, path: Path) -> Path | None:
    """Accuracy against confidence per bin, one line per model judge with probabilities."""
    judges = {j: b["calibration"] for j, b in cal["judges"].items() if b.get("calibration")}
    if not judges:
        return None
    from gamut_local.reporting.figures import DPI, plt, save_figure  # matplotlib only when drawing

    fig, (ax, hist) = plt.subplots(2, 1, figsize=(5.2, 6.0), sharex=True, dpi=DPI,
                                   gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], color="#9e9e9e", linestyle="--", linewidth=1, label="perfectly calibrated")
    width = 1.0 / cal["n_bins"] / (len(judges) + 1)
    for k, (judge, c) in enumerate(sorted(judges.items())):
        pts = [(b["confidence"], b["accuracy"]) for b in c["bins"] if b["n"]]
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=f"{judge} (ECE {c['ece']:.3f})")
        hist.bar([b["low"] + (k + 0.5) * width for b in c["bins"]], [b["n"] for b in c["bins"]], width=width)
    ax.set(xlim=(0, 1), ylim=(0, 1), ylabel="accuracy against gold",
           title=f"Reliability of label probabilities (gold: {cal['gold']})")
    ax.legend(fontsize=8, loc="upper left")
    hist.set(xlabel="probability of the label given (confidence)", ylabel="cells")
    return save_figure(fig, path)


def _f(x, digits=3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def markdown(cal: dict, figure: str | None = None) -> list[str]:
    """The report's section: one table per comparison, then the notes."""
    out = ["## Calibration against human verdicts", "",
           (f"Gold: `{cal['gold']}` ({', '.join(f'`{j}`' for j in cal['gold_judges']) or 'no judge'}; "
            f"majority per cell, {cal['n_gold_cells']} cells with gold, {cal['n_gold_ties']} ties left out)."), ""]
    rows = []
    for judge, b in cal["judges"].items():
        g, c = b["vs_gold"] or {}, b["calibration"] or {}
        rows.append(f"| `{judge}` | {g.get('n', 0)} | {_f(g.get('accuracy'))} | {_f(g.get('cohen_kappa'))} | "
                    f"{_f(c.get('ece'))} |")
        for h, x in b["vs_human"].items():
            rows.append(f"| `{judge}` vs `{h}` | {x['n']} | {_f(x['accuracy'])} | {_f(x['cohen_kappa'])} | |")
    if rows:
        out += ["| model judge | cells | accuracy | Cohen's κ | ECE |", "|---|---|---|---|---|", *rows, ""]
    for judge, b in cal["judges"].items():
        for group in ("tier", "kind"):
            per = (b["vs_gold"] or {}).get(f"by_{group}") or {}
            ece = (b["calibration"] or {}).get(f"by_{group}") or {}
            if per:
                out += [f"`{judge}` vs gold by {group}:", "", f"| {group} | cells | accuracy | κ | ECE |",
                        "|---|---|---|---|---|"]
                out += [f"| {k} | {x['n']} | {_f(x['accuracy'])} | {_f(x['cohen_kappa'])} | "
                        f"{_f((ece.get(k) or {}).get('ece'))} |" for k, x in per.items()]
                out += [""]
    ia = cal["inter_annotator"]
    alpha = ia["krippendorff_alpha"]
    out += [(f"Inter-annotator agreement ({', '.join(f'`{a}`' for a in ia['annotators']) or 'none'}): "
             f"Krippendorff's α nominal {_f(alpha['nominal'])}, ordinal {_f(alpha['ordinal'])}.")]
    out += [f"- `{p['a']}` vs `{p['b']}`: {p['n']} cells, agreement {_f(p['accuracy'])}, κ {_f(p['cohen_kappa'])}"
            for p in ia["pairs"]]
    out += [""]
    if figure:
        out += [f"![reliability diagram]({figure})", ""]
    out += [f"- null {k}: {why}" for k, why in cal["notes"].items()]
    return out + [""]


def write_calibration(table, gold: str, out_json: Path, figure: Path | None = None) -> dict:
    """Calibrate a VerdictTable and write the JSON (full precision) and the reliability PNG."""
    from gamut_local.rundir.store import write_json

    cal = calibrate_table(table, gold=gold)
    write_json(out_json, cal)
    if figure is not None:
        reliability_diagram(cal, figure)
    return cal


def calibration_files(paths: list[Path], gold: str, out_json: Path, figure: Path | None = None) -> dict:
    """Read verdict files (human ones newest-wins), calibrate, write the JSON and the PNG."""
    from gamut_local.data.verdict_table import read_verdicts

    return write_calibration(read_verdicts(list(paths)), gold, out_json, figure)


def beside(out: Path) -> tuple[Path, Path]:
    """Where `agree --out X.json --gold ...` puts calibration: X.calibration.json, X.reliability.png."""
    return out.with_name(f"{out.stem}.calibration.json"), out.with_name(f"{out.stem}.reliability.png")


def report_section(run_dir: Path, files: list[Path], gold: str = "human-*", console=None,
                   out_dir: Path | None = None) -> str:
    """The report's calibration section for a run with human verdicts (`verdicts/human-*/`),
    writing tables/calibration.json and figures/reliability.png under `out_dir` (default: the
    run directory); "" for a run without any."""
    if not any(is_human(f.parent.name) for f in map(Path, files)):
        return ""
    from gamut_local.data.verdict_table import read_verdicts

    out_dir = Path(out_dir or run_dir)
    figure = out_dir / "figures" / "reliability.png"
    cal = write_calibration(read_verdicts(files), gold, out_dir / "tables" / "calibration.json", figure)
    drawn = figure.is_file() and any(b.get("calibration") for b in cal["judges"].values())
    return "\n" + "\n".join(markdown(cal, "figures/reliability.png" if drawn else None))
