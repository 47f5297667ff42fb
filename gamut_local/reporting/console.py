"""What the commands print about their results, as plain lines: scores, agreement, the
text-only comparison, a calibration sample and its plan. No markup, no rendering (`echo`)."""

from __future__ import annotations


def echo(console, lines) -> None:
    """Many plain lines at once: through rich one by one, 60,000 lines of a `diff` took longer
    than the diff. Plain text needs none of its rendering (no markup, no highlighting)."""
    text = "".join(f"{line}\n" for line in lines)
    if text:
        console.file.write(text)
        console.file.flush()


def coverage_mark(m) -> str:
    """`m`: a scores file's ModelScore."""
    return "" if m.complete else (f"  INCOMPLETE: {m.n_complete_responses}/{m.n_questions} questions, "
                                  f"{m.n_missing_verdicts} verdicts missing")


def corrected(m) -> str:
    c = m.corrected
    if c is None:
        return ""
    if c.score is None:
        return f"  corrected: none ({c.reason})"
    return (f"  corrected {c.score:6.1f} [{c.ci_low:.1f}, {c.ci_high:.1f}]  human-only "
            f"{c.human_only:.1f} [{c.human_only_ci_low:.1f}, {c.human_only_ci_high:.1f}]  "
            f"n {c.n_labeled}/{c.n_total}  bias {c.bias:+.1f}")


def _num(x, spec: str) -> str:
    """A number as `spec` formats it; a null one (nothing to compute it from) as a dash of the
    same width, so columns stay aligned."""
    return format(x, spec) if x is not None else "—".rjust(int(spec.lstrip("+").split(".")[0] or 0))


def score_lines(models, *, ci: bool = True) -> list[str]:
    """One line per system (judge, model, variant) of a scores file's `models` (ModelScore)."""
    def interval(m) -> str:
        return f"  [{_num(m.ci95[0], '.1f')}, {_num(m.ci95[1], '.1f')}]" if ci else ""

    return [f"{m.judge:>20}  {m.model:<28} {m.variant:<10} GAMUT {_num(m.gamut_score, '6.1f')}"
            f"{interval(m)}{coverage_mark(m)}{corrected(m)}" for m in models]


def agreement_lines(result, out_path) -> list[str]:
    """The judges, the keys each lacks, and per pair of judges tau and kappa (and why any is
    null), of an AgreementFile."""
    missing = ", ".join(f"{j} {n}" for j, n in result.keys.missing.items())
    lines = [f"{out_path}: {len(result.judges)} judges on {result.keys.total} keys "
             f"(keys each judge lacks: {missing})"]
    for p in result.pairs:
        tau = "—" if p.kendall_tau_b is None else f"{p.kendall_tau_b:.3f}"
        kappa = "—" if p.cohen_kappa is None else f"{p.cohen_kappa:.3f}"
        lines.append(f"  {p.judge_a} vs {p.judge_b}: Kendall tau-b {tau} (on {p.n_questions} questions), "
                     f"Cohen kappa {kappa}")
    for where, why in result.notes.items():
        lines.append(f"  null {where}: {why}")
    return lines


def comparison_lines(result) -> list[str]:
    """Per judge of a `Comparison`: text-only against multimodal, the gain per model and the
    rank agreement."""
    lines = []
    for judge, c in result.judges.items():
        if not c.n_models:
            lines.append(f"{judge}: {c.notes['models']}")
            continue
        r, tau = c.pearson_r_multimodal_gain, c.kendall_tau_b_rankings
        lines.append(f"{judge}: {c.n_models} models, mean gain {_num(c.mean_gain, '+.2f')}, "
                     f"r(multimodal, gain) {'—' if r is None else f'{r:.3f}'}, "
                     f"Kendall tau-b {'—' if tau is None else f'{tau:.3f}'}")
        for m in c.models:
            lines.append(f"  {m.model:<28} multimodal {_num(m.multimodal, '6.1f')}  "
                         f"text_only {_num(m.text_only, '6.1f')}  gain {_num(m.gain, '+6.1f')}")
    return lines


def strata_lines(design) -> list[str]:
    """A calibration sample's strata: how many responses of each system were drawn, of how many."""
    return [f"  {st.model:<28} {st.variant:<10} {st.sampled} of {st.population} "
            f"(inclusion probability {st.inclusion_probability:.4g})" for st in design.strata]


def sample_plan_lines(rows) -> list[str]:
    """Per system (`SystemPlan`): the responses (and keypresses) people must grade, corrected
    and human-only."""
    lines = []
    for r in rows:
        head = f"{r.judge:>20}  {r.model:<28} {r.variant:<10} pilot {r.pilot_n:>4} of {r.n_total}"
        if r.reason:
            lines.append(f"{head}  {r.reason}")
            continue
        short = "" if r.reachable else " (not reachable: fewer responses than that)"
        lines.append(f"{head}  corrected {r.corrected_n} ({r.corrected_keypresses} keypresses){short}  "
                     f"human-only {r.human_only_n} ({r.human_only_keypresses} keypresses)")
    return lines
