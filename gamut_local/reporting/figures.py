"""The report's PNG figures, drawn from `report_tables` output with matplotlib's Agg backend.

One function per figure; each returns the path it wrote or None when its table is empty
(the report says why that section is absent). `reporting.drawing` draws them all, in worker
processes where it can.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
# Glyphs unhinted: as legible at this size and dpi, and a tenth less drawing time for these
# figures, whose text is most of their cost.
matplotlib.rcParams["text.hinting"] = "no_hinting"
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.layout_engine import TightLayoutEngine  # noqa: E402

from gamut_local.rundir.store import write_bytes_atomic  # noqa: E402
from gamut_local.vocab import TIERS, VERDICTS  # noqa: E402

VERDICT_COLOURS = {"meets": "#2e7d32", "partially_meets": "#9ccc65", "missing": "#bdbdbd",
                   "contradicts": "#c62828", "invalid": "#6a1b9a"}
TIER_COLOURS = {"answer_critical": "#1565c0", "valuable": "#42a5f5", "context": "#bbdefb"}
DPI = 110
PNG_LEVEL = 3
LEGEND_PAD = 0.3  # inches around a legend below the panels
PANEL_COLS = 3  # panels (one per judge) side by side, at most


def _grid(n: int, width: float, height: float):
    cols = min(n, PANEL_COLS)
    rows = math.ceil(n / cols)
    # Made at the saving dpi: the layout pass and the drawing then share one renderer, and
    # with it the text measurements matplotlib caches per renderer.
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, dpi=DPI)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def save_figure(fig, path: Path) -> Path:
    """Lay the figure out and write it (every figure of a report, the reliability diagram
    too): one layout pass and one drawing. (`bbox_inches="tight"` would draw it once more to
    measure it, as would a layout engine left on the figure.) A legend below the panels gets
    its own strip, added to the figure's height."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The engine run once by hand, not `fig.tight_layout()`: that leaves a placeholder engine on
    # the figure, and savefig then draws it once more, unrendered, before the real drawing
    # (pixel-identical without: 4.4 CPU-s for the seven paper-scale figures against 5.1). And
    # without `rect`, with which it measures every text twice.
    TightLayoutEngine().execute(fig)
    for legend in fig.legends:  # `_legend_below`'s, the only kind of figure legend here
        _strip_below(fig, legend)
    buf = io.BytesIO()  # then one atomic write: a killed report never leaves half a PNG
    kind = path.suffix.lstrip(".") or "png"
    # zlib level 3, not 6: the same pixels, 5% more bytes, 40% less encoding (0.6 -> 0.36
    # CPU-s for a paper-scale report's figures).
    fig.savefig(buf, format=kind, dpi=DPI, **({"pil_kwargs": {"compress_level": PNG_LEVEL}} if kind == "png" else {}))
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())
    return path


def _strip_below(fig, legend) -> None:
    """Grow the laid-out figure downwards by a strip that holds `legend`: every panel and margin
    keeps its size in inches."""
    old = fig.get_figheight()
    strip = legend.get_window_extent(fig.canvas.get_renderer()).height / fig.dpi + LEGEND_PAD
    height = old + strip
    bottom, top = fig.subplotpars.bottom, fig.subplotpars.top
    fig.set_figheight(height)
    fig.subplots_adjust(bottom=(bottom * old + strip) / height, top=1 - (1 - top) * old / height)
    legend.set_bbox_to_anchor((0.5, LEGEND_PAD / 2 / height), transform=fig.transFigure)


def _legend_below(fig, handles, names, ncol: int) -> None:
    """A legend for the whole figure, below its panels (`save_figure` makes room for it)."""
    fig.legend(handles, names, loc="lower center", ncol=ncol, fontsize=8, frameon=False)


def _by_judge(rows: list[dict], judges: list[str]) -> dict[str, list[dict]]:
    return {j: [r for r in rows if r["judge"] == j] for j in judges if any(r["judge"] == j for r in rows)}


def _hbars(ax, y, widths, *, left=0.0, height: float = 0.8, color, label: str | None = None, **style):
    """Horizontal bars as one PolyCollection, as `ax.barh` draws them (NaN: no bar) but one
    artist per series instead of one per bar: a third less matplotlib time at paper scale."""
    y = np.asarray(y, dtype=float)
    x0 = np.broadcast_to(np.asarray(left, dtype=float), y.shape)
    x1 = x0 + np.asarray(widths, dtype=float)
    y0, y1 = y - height / 2, y + height / 2
    corners = np.stack([np.stack(c, axis=1) for c in ((x0, y0), (x0, y1), (x1, y1), (x1, y0))], axis=1)
    bars = PolyCollection(corners[np.isfinite(corners).all(axis=(1, 2))], facecolors=color, label=label,
                          edgecolors=style.pop("edgecolor", "none"), linewidths=style.pop("lw", 0), **style)
    bars.sticky_edges.x.extend(np.unique(x0))  # bars grow from their left edge, as barh's do
    ax.add_collection(bars)
    ax.autoscale_view()
    return bars


def _name_rows(ax, rows: list[dict]) -> None:
    """Each bar row's system, without a tick mark (the bar marks the row: one artist fewer to draw)."""
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows])
    ax.tick_params(axis="y", left=False)


def _row_height(n: int) -> float:
    return max(2.6, 0.32 * n + 1.4)


def leaderboard(tables: dict, path: Path) -> Path | None:
    # A system without a score on its judge's common questions (none shared) has no bar.
    scored = [r for r in tables["leaderboard"] if r["gamut_score"] is not None]
    groups = _by_judge(scored, tables["judges"])
    if not groups:
        return None
    n_max = max(len(g) for g in groups.values())
    ends = [v for r in scored for v in (r["gamut_score"], r["ci95_low"], r["ci95_high"]) if v is not None]
    xlim = (min(0.0, min(ends)) - 5, max(0.0, max(ends)) + 5)
    fig, axes = _grid(len(groups), 5.5, _row_height(n_max))
    for ax, (judge, rows) in zip(axes, groups.items()):
        rows = rows[::-1]  # best on top
        y = np.arange(len(rows))
        s = np.array([r["gamut_score"] for r in rows], dtype=float)
        lo = np.array([r["ci95_low"] if r["ci95_low"] is not None else np.nan for r in rows], dtype=float)
        hi = np.array([r["ci95_high"] if r["ci95_high"] is not None else np.nan for r in rows], dtype=float)
        _hbars(ax, y, s, color="#5c6bc0", alpha=0.85)
        # One (2, n) array: a list of two 1-element arrays trips numpy's scalar deprecation.
        ax.errorbar(s, y, xerr=np.vstack([s - lo, hi - s]), fmt="none", ecolor="black", capsize=3, lw=1)
        _name_rows(ax, rows)
        ax.axvline(0, color="black", lw=0.6)
        ax.set_xlim(*xlim)  # one scale for every judge, so panels compare by eye
        ax.set_xlabel("GAMUT score (points), 95% bootstrap CI")
        ax.set_title(f"judge: {judge}")
        ax.grid(axis="x", alpha=0.3)
    return save_figure(fig, path)


def tier_scores(tables: dict, path: Path) -> Path | None:
    groups = _by_judge(tables["tiers"], tables["judges"])
    if not groups:
        return None
    n_max = max(len(g) for g in groups.values())
    fig, axes = _grid(len(groups), 5.5, _row_height(n_max) * 1.3)
    h = 0.8 / len(TIERS)
    for ax, (judge, rows) in zip(axes, groups.items()):
        rows = rows[::-1]
        y = np.arange(len(rows))
        for k, tier in enumerate(TIERS):
            vals = np.array([np.nan if r[tier] is None else r[tier] for r in rows], dtype=float)
            # Highest tier drawn on top within each model's group.
            _hbars(ax, y + (1 - k) * h, vals, height=h, color=TIER_COLOURS[tier], label=tier)
        _name_rows(ax, rows)
        ax.axvline(0, color="black", lw=0.6)
        ax.set_xlabel("tier score (points)")
        ax.set_title(f"judge: {judge}")
        ax.grid(axis="x", alpha=0.3)
    handles, names = axes[0].get_legend_handles_labels()
    _legend_below(fig, handles, names, ncol=3)
    return save_figure(fig, path)


def verdict_distribution(tables: dict, path: Path) -> Path | None:
    groups = _by_judge(tables["verdicts"], tables["judges"])
    if not groups:
        return None
    n_max = max(len(g) for g in groups.values())
    fig, axes = _grid(len(groups), 6.0, _row_height(n_max))
    for ax, (judge, rows) in zip(axes, groups.items()):
        rows = rows[::-1]
        y = np.arange(len(rows))
        left = np.zeros(len(rows))
        for v in VERDICTS:
            vals = 100 * np.array([r[v] or 0.0 for r in rows])
            _hbars(ax, y, vals, left=left, color=VERDICT_COLOURS[v], label=v, edgecolor="white", lw=0.4)
            left += vals
        _name_rows(ax, rows)
        ax.set_xlim(0, 100)
        ax.set_xlabel("% of checks")
        ax.set_title(f"judge: {judge}", fontsize=10)  # a longer title ran past a narrow panel
    handles, names = axes[0].get_legend_handles_labels()
    _legend_below(fig, handles, names, ncol=5)
    return save_figure(fig, path)


ANNOTATE_MAX_CELLS = 200


def domain_heatmap(tables: dict, path: Path) -> Path | None:
    if not tables["domains"]:
        return None
    groups = _by_judge(tables["domains"], tables["judges"])
    domains = sorted({d["domain"] for d in tables["domains"]})
    # Every panel has the same rows, in the leaderboard's order, so the names are written once,
    # left of each row of panels, and one colour bar serves all panels (one scale).
    scored = [d["label"] for d in tables["domains"]]
    labels = [lab for lab in dict.fromkeys([r["label"] for r in tables["leaderboard"]] + scored) if lab in scored]
    cols = min(len(groups), PANEL_COLS)
    n_rows, width = math.ceil(len(groups) / cols), max(2.5, 0.45 * len(domains))
    # Room beside the panels for the names and the colour bar; `save_figure` fits them in.
    fig = plt.figure(figsize=(cols * width + 3.5, n_rows * (_row_height(len(labels)) + 1.4)), dpi=DPI)
    grid = fig.add_gridspec(n_rows, cols + 1, width_ratios=[width] * cols + [0.2])
    for i, (judge, rows) in enumerate(groups.items()):
        ax = fig.add_subplot(grid[i // cols, i % cols])
        cells = np.full((len(labels), len(domains)), np.nan)  # blank: the judge did not score it
        for r in rows:
            if r["gamut_score"] is not None:
                cells[labels.index(r["label"]), domains.index(r["domain"])] = r["gamut_score"]
        im = ax.imshow(cells, cmap="RdYlGn", vmin=-100, vmax=100, aspect="auto")
        # Numbers in the cells while they are legible; beyond that the colour says it and the
        # report's per-domain table has the figures (and text is most of the drawing time).
        if cells.size <= ANNOTATE_MAX_CELLS:
            for (y, x), val in np.ndenumerate(cells):
                if np.isfinite(val):
                    ax.text(x, y, f"{val:.0f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(domains)), domains, rotation=40, ha="right")
        if i % cols == 0:
            ax.set_yticks(range(len(labels)), labels)
        else:
            ax.set_yticks([])
        ax.set_title(f"judge: {judge}")
    fig.colorbar(im, cax=fig.add_subplot(grid[:, cols]), label="GAMUT score")
    return save_figure(fig, path)


LEGEND_MAX = 20  # more points than this: no per-point legend, the table names them


def _scatter_with_diagonal(ax, pts: list[tuple[float, float, str]], colours: dict[str, tuple]) -> None:
    """Points coloured per name (legend drawn by the caller) and the y = x line."""
    # One collection for all the points (drawn in this order), not one artist per point.
    ax.scatter([x for x, _, _ in pts], [y for _, y, _ in pts], color=[colours.get(n, "#3949ab") for *_, n in pts],
               s=42, zorder=3, edgecolor="black", lw=0.4)
    vals = [v for x, y, _ in pts for v in (x, y)]
    lo, hi = min(vals), max(vals)
    pad = 0.08 * (hi - lo) + 2
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="grey", ls="--", lw=1, zorder=1)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)


def _colours(names: list[str]) -> dict[str, tuple]:
    if len(names) > LEGEND_MAX:
        return {}
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {n: cmap(i) for i, n in enumerate(names)}


def _point_legend(fig, colours: dict[str, tuple]) -> None:
    if not colours:
        return
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, markeredgecolor="black",
                          markeredgewidth=0.4) for c in colours.values()]
    # As many columns as the figure is wide enough for (about 2.4 inches a name).
    ncol = max(1, min(len(handles), int(fig.get_figwidth() // 2.4)))
    _legend_below(fig, handles, list(colours), ncol=ncol)


def judge_scatter(tables: dict, path: Path) -> Path | None:
    a = tables["agreement"]
    if a is None or not a["pairs"]:
        return None
    label = {(s["model"], s["variant"]): s["label"] for s in tables["systems"]}
    colours = _colours([s["label"] for s in tables["systems"]])
    fig, axes = _grid(len(a["pairs"]), 4.3, 4.3)
    shown = set()
    for ax, p, ps in zip(axes, a["pairs"], a["pair_scores"]):
        pts = [(m["a"], m["b"], label[(m["model"], m["variant"])]) for m in ps["models"]]
        shown.update(name for *_, name in pts)
        if pts:
            _scatter_with_diagonal(ax, pts, colours)
        tau = p["kendall_tau_b"]
        ax.set_title(f"Kendall τ-b = {'—' if tau is None else f'{tau:.2f}'} (dashed: y = x)", fontsize=10)
        ax.set_xlabel(f"{p['judge_a']} (GAMUT)")
        ax.set_ylabel(f"{p['judge_b']} (GAMUT)")
    # Only systems with a point: one scored by a single judge has none (same colours as elsewhere).
    _point_legend(fig, {name: c for name, c in colours.items() if name in shown})
    return save_figure(fig, path)


def confusion(tables: dict, path: Path) -> Path | None:
    a = tables["agreement"]
    if a is None or not a["pairs"]:
        return None
    fig, axes = _grid(len(a["pairs"]), 4.6, 4.2)
    short = ["meets", "partial", "missing", "contra.", "invalid"]
    for ax, p in zip(axes, a["pairs"]):
        c = np.asarray(p["confusion"], dtype=float)
        rows = c.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(rows > 0, c / rows, 0.0)
        ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
        for (i, k), n in np.ndenumerate(c):
            ax.text(k, i, f"{int(n):,}", ha="center", va="center", fontsize=7,
                    color="white" if share[i, k] > 0.6 else "black")
        ax.set_xticks(range(5), short, rotation=35, ha="right", fontsize=8)
        ax.set_yticks(range(5), short, fontsize=8)
        ax.set_xlabel(p["judge_b"])
        ax.set_ylabel(p["judge_a"])
        kappa = p["cohen_kappa"]
        ax.set_title(f"κ = {'—' if kappa is None else f'{kappa:.2f}'} (shade: row share)", fontsize=10)
    return save_figure(fig, path)


def variants(tables: dict, path: Path) -> Path | None:
    groups = {j: v for j, v in tables["variants"].items() if v["n_models"]}
    if not groups:
        return None
    colours = _colours(sorted({m["model"] for v in groups.values() for m in v["models"]}))
    fig, axes = _grid(len(groups), 4.5, 4.5)
    for ax, (judge, v) in zip(axes, groups.items()):
        _scatter_with_diagonal(ax, [(m["multimodal"], m["text_only"], m["model"]) for m in v["models"]], colours)
        ax.set_xlabel("multimodal (GAMUT)")
        ax.set_ylabel("text_only (GAMUT)")
        r = v["pearson_r_multimodal_gain"]
        ax.set_title(f"judge: {judge}; mean gain {v['mean_gain']:+.1f}, "
                     f"r(mm, gain) = {'—' if r is None else f'{r:.2f}'}", fontsize=9)
    _point_legend(fig, colours)
    return save_figure(fig, path)


FIGURES = {"leaderboard": leaderboard, "tiers": tier_scores, "verdicts": verdict_distribution,
           "domains": domain_heatmap, "judge_scatter": judge_scatter, "confusion": confusion,
           "variants": variants}


def draw(name: str, tables: dict, out_dir: Path) -> Path | None:
    """Draw one figure (FIGURES[name]) into out_dir; None when its table is empty."""
    return FIGURES[name](tables, Path(out_dir) / f"{name}.png")
