"""The console's result lines: a null figure (nothing to compute it from) prints as a dash."""

from __future__ import annotations

from types import SimpleNamespace

from gamut_local.reporting.console import comparison_lines, score_lines


def _system(score, ci):
    return SimpleNamespace(judge="j", model="m", variant="text_only", gamut_score=score, ci95=ci,
                           complete=True, corrected=None)


def test_a_null_score_and_interval_print_as_dashes():
    lines = score_lines([_system(None, [None, None]), _system(12.345, [10.0, 14.5])])
    assert "GAMUT      —  [—, —]" in lines[0]
    assert "GAMUT   12.3  [10.0, 14.5]" in lines[1]
    assert "[" not in score_lines([_system(None, [None, None])], ci=False)[0]


def test_a_null_gain_prints_as_a_dash():
    model = SimpleNamespace(model="m", multimodal=None, text_only=40.0, gain=None)
    judge = SimpleNamespace(n_models=1, notes={}, pearson_r_multimodal_gain=None, kendall_tau_b_rankings=None,
                            mean_gain=None, models=(model,))
    lines = comparison_lines(SimpleNamespace(judges={"j": judge}))
    assert "mean gain —," in lines[0]
    assert lines[1].split() == ["m", "multimodal", "—", "text_only", "40.0", "gain", "—"]
