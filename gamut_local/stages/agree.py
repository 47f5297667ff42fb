"""`gamut-local agree`: read verdict files of several judges and compare the judges on the
same responses (rank agreement, kappa, Krippendorff's alpha, calibration against `gold`);
the statistics themselves are in `agreement`."""

from __future__ import annotations

from pathlib import Path

from gamut_local.analysis.agreement import Panel, agree_panel, panel_from_records


def read_panel(paths: list[Path]) -> Panel:
    """Read and validate verdict JSONL files into a Panel."""
    from gamut_local.data.records import Verdict, load_records, verdict_key

    records = load_records(list(paths), Verdict, verdict_key)
    return panel_from_records(records, source=", ".join(str(p) for p in paths))


def agree_records(records: list[dict]) -> dict:
    """Everything `gamut-local agree` writes, from verdict dicts of several judges."""
    return agree_panel(panel_from_records(records))


def agree_files(paths: list[Path]) -> dict:
    """Everything `gamut-local agree` writes, from verdict JSONL files."""
    return agree_panel(read_panel(paths))
