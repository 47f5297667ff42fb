"""The report's figures: drawn by worker processes or in this one, the very same PNGs."""

from gamut_local.analysis.agreement import agree_panel, panel_from_table
from gamut_local.analysis.scoring import score_table
from gamut_local.analysis.summary import report_tables
from gamut_local.data.verdict_table import table_from_records
from gamut_local.reporting import drawing, figures
from gamut_local.testing.synthetic import make_records


def _tables() -> dict:
    records = make_records(variants=("multimodal", "text_only"), questions=12, checks=4)
    domains = {r["question_id"]: ("food", "plants")[int(r["question_id"][1:]) % 2] for r in records}
    table = table_from_records(records)
    scores = score_table(table, domains, n_boot=50)
    return report_tables(scores, agree_panel(panel_from_table(table), scores.score))


def test_workers_draw_the_same_figures_as_one_process(tmp_path):
    t = _tables()
    alone = drawing.draw_all(t, tmp_path / "one")
    with drawing.drawing_pool(workers=3) as pool:
        assert pool is not None
        pooled = drawing.draw_all(t, tmp_path / "pool", pool)
    assert set(alone) == set(pooled) == set(figures.FIGURES)  # every figure has data here
    for name, path in alone.items():
        assert path.read_bytes() == pooled[name].read_bytes(), name


def test_every_figure_has_a_place_in_the_workers_order():
    assert sorted(drawing.SLOWEST_FIRST) == sorted(figures.FIGURES)
