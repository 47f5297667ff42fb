"""The report's figures: drawn by worker processes or in this one, the very same PNGs."""

import sys
import types

from gamut_local.analysis.agreement import agree_panel, panel_from_table
from gamut_local.analysis.scoring import score_table
from gamut_local.analysis.summary import report_tables
from gamut_local.data.verdict_table import table_from_records
from gamut_local.reporting import drawing, figures
from tests.support import processes
from tests.support.synthetic import make_records


def _tables() -> dict:
    records = make_records(variants=("multimodal", "text_only"), questions=12, checks=4)
    domains = {r["question_id"]: ("food", "plants")[int(r["question_id"][1:]) % 2] for r in records}
    table = table_from_records(records)
    scores = score_table(table, domains, n_boot=50)
    return report_tables(scores, agree_panel(panel_from_table(table), scores))


# The workers' side runs in a fresh interpreter: in this one, other tests may have loaded
# torch, and `drawing_pool` rightly refuses to fork such a process.
WORKERS = """
import json, sys
from pathlib import Path
from gamut_local.reporting import drawing
tables = json.loads(Path(sys.argv[1]).read_text())
with drawing.drawing_pool(workers=3) as workers:
    workers.start()
    assert workers.pool is not None, "no worker processes"
    paths = drawing.draw_all(tables, Path(sys.argv[2]), workers)
assert "matplotlib" not in sys.modules, "this process imported matplotlib"
print(json.dumps({name: str(path) for name, path in paths.items()}))
"""


def test_workers_draw_the_same_figures_as_one_process(tmp_path):
    import json
    from pathlib import Path

    (tmp_path / "tables.json").write_text(json.dumps(_tables()))
    tables = json.loads((tmp_path / "tables.json").read_text())  # the very data the workers get
    alone = drawing.draw_all(tables, tmp_path / "one")
    # 300 s: the figures drawn in forked workers, on a busy 2-core machine.
    done = processes.run([sys.executable, "-c", WORKERS, str(tmp_path / "tables.json"), str(tmp_path / "pool")],
                         timeout=300, waiting_for="the figures from the worker pool")
    assert done.returncode == 0, done.stderr
    pooled = json.loads(done.stdout)
    assert set(alone) == set(pooled) == set(figures.FIGURES)  # every figure has data here
    for name, path in alone.items():
        assert path.read_bytes() == Path(pooled[name]).read_bytes(), name


def test_an_engine_process_draws_alone(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or types.ModuleType("torch"))
    with drawing.drawing_pool(workers=3) as workers:
        workers.start()
        assert workers.pool is None


def test_every_figure_has_a_place_in_the_workers_order():
    assert sorted(drawing.SLOWEST_FIRST) == sorted(figures.FIGURES)


def test_each_figure_is_drawn_once(tmp_path, monkeypatch):
    """One drawing per PNG: a second (measuring) drawing costs ~15% of a paper-scale report's
    figures, and it comes back silently (`bbox_inches="tight"`, or `fig.tight_layout()`, whose
    leftover layout engine makes savefig draw first without rendering)."""
    from matplotlib.figure import Figure

    drawn = []
    real = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda fig, renderer: (drawn.append(fig), real(fig, renderer))[1])
    tables = _tables()
    for name in figures.FIGURES:
        drawn.clear()
        assert figures.draw(name, tables, tmp_path) is not None, name
        assert len(drawn) == 1, (name, len(drawn))


def test_the_scatter_legend_names_only_systems_with_a_point(tmp_path, monkeypatch):
    """A system only one judge scored has no point in any judge-vs-judge panel."""
    tables = _tables()
    tables["systems"] = [*tables["systems"], {"model": "solo", "variant": "text_only", "label": "solo (text)"}]
    saved = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path: saved.append(fig) or path)
    figures.draw("judge_scatter", tables, tmp_path)
    (legend,) = saved[0].legends
    named = {t.get_text() for t in legend.get_texts()}
    plotted = {s["label"] for s in tables["systems"]} - {"solo (text)"}
    assert named == plotted


def _saved(monkeypatch, names, tables, tmp_path) -> list:
    """The figures `names` as `save_figure` left them (laid out and drawn)."""
    saved, real = [], figures.save_figure
    monkeypatch.setattr(figures, "save_figure", lambda fig, path: saved.append(fig) or real(fig, path))
    for name in names:
        figures.draw(name, tables, tmp_path)
    return saved


def test_a_legend_below_the_panels_overlaps_none_of_them(tmp_path, monkeypatch):
    """The strip `save_figure` adds below a laid-out figure holds the whole legend."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for fig in _saved(monkeypatch, ("tiers", "verdicts", "variants"), _tables(), tmp_path):
        renderer = FigureCanvasAgg(fig).get_renderer()  # closed figures lose their canvas
        (legend,) = fig.legends
        box = legend.get_window_extent(renderer)
        assert box.y0 >= 0
        assert all(box.y1 < ax.get_tightbbox(renderer).y0 for ax in fig.axes if ax.get_visible())


def test_the_domain_panels_share_their_rows_names_and_colour_scale(tmp_path, monkeypatch):
    """Every panel has every system's row (blank where its judge scored none), named once on the left."""
    tables = _tables()
    gone = tables["domains"][0]["label"]
    tables["domains"] = [d for d in tables["domains"] if (d["judge"], d["label"]) != ("judge-b", gone)]
    (fig,) = _saved(monkeypatch, ("domains",), tables, tmp_path)
    *panels, bar = fig.axes
    assert [ax.get_title() for ax in panels] == [f"judge: {j}" for j in tables["judges"]]
    labels = [t.get_text() for t in panels[0].get_yticklabels()]
    assert len(labels) == len({d["label"] for d in tables["domains"]})
    assert all(ax.images[0].get_array().shape[0] == len(labels) and not ax.get_yticklabels() for ax in panels[1:])
    assert bar.get_ylabel() == "GAMUT score"
