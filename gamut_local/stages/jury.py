"""`gamut-local jury RUN --judges a,b,c --rule majority|mean-probs|dawid-skene --name NAME`:
a judge made of judges. Reads the members' verdict files, aggregates each cell's verdicts
(`analysis.jury`) and writes ordinary verdict records, judge `NAME`, to
`verdicts/NAME/<model>.<variant>.jsonl`, so every stage reads them like any judge's (as the
predictor of corrected scores too). The records' `settings_hash` is the jury's identity: its
rule and its members with their own settings hashes; a rerun with another identity is refused.
`RUN/juries/NAME.json` records the members, the rule and, for Dawid-Skene, each member's
estimated confusion matrix (the report shows it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gamut_local.analysis.jury import RULES, aggregate
from gamut_local.data.verdict_table import VerdictTable, read_verdicts, row_key
from gamut_local.errors import InputError, Problem
from gamut_local.hashing import short_hash
from gamut_local.rundir.human import is_human
from gamut_local.rundir.layout import check_name, name_problem, store_path, verdict_files
from gamut_local.rundir.store import write_json
from gamut_local.rundir.verdict_store import replace_unit
from gamut_local.vocab import JUDGE_LABELS, TIERS, VARIANTS, VERDICTS

def jury_path(run_dir: Path, name: str) -> Path:
    return Path(run_dir) / "juries" / f"{name}.json"


def _check(run_dir: Path, members: list[str], rule: str, name: str) -> list[Path]:
    problems = []
    if rule not in RULES:
        problems.append(Problem("--rule", None, "", f"expected one of {', '.join(RULES)}, got {rule!r}"))
    if len(members) < 2 or len(set(members)) != len(members):
        problems.append(Problem("--judges", None, "", f"a jury needs two or more different judges, got {members}"))
    check_name(name, "jury name", "--name")
    if name in members or is_human(name):
        problems.append(Problem("--name", None, "", f"{name!r} must be a new judge name, not a member or human"))
    files = []
    for m in members:  # model judges of the run, named exactly: a name becomes a path (and a glob)
        bad = name_problem(m, "judge", "--judges")
        if bad is not None or is_human(m):
            problems.append(bad or Problem("--judges", None, "", f"{m!r} is a human judge: a jury is made of model "
                                           "judges (humans are the gold its scores are checked or corrected against)"))
            continue
        found = verdict_files(Path(run_dir), m) if (Path(run_dir) / "verdicts" / m).is_dir() else []
        if not found:
            problems.append(Problem(str(Path(run_dir) / "verdicts" / m), None, "", f"no verdict files of the judge "
                                    f"{m!r} in this run (judges: {', '.join(_judges(Path(run_dir))) or 'none'})"))
        files += found
    if problems:
        raise InputError(problems)
    return files


def _judges(run_dir: Path) -> list[str]:
    root = run_dir / "verdicts"
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not is_human(p.name)) if root.is_dir() else []


def _member_hashes(members: list[str], table: VerdictTable) -> dict[str, list[str]]:
    """{member: its verdicts' settings hashes, sorted ("" for a verdict without one)}."""
    hashes = {}
    for m in members:
        rows = table.judge == (table.judges.index(m) if m in table.judges else -1)
        codes = np.unique(table.settings_hash[rows]) if table.settings_hash is not None else []
        hashes[m] = sorted({table.settings_hashes[c] if c >= 0 else "" for c in codes.tolist()} if len(codes) else set())
    return hashes


def _jury_hash(rule: str, hashes: dict) -> str:
    """The jury's identity: its rule and its members with their own settings hashes."""
    text = json.dumps({"rule": rule, "members": hashes}, sort_keys=True)
    return short_hash(text)


def _cells(table: VerdictTable, members: list[str]):
    """Cells (question, model, variant, check), in the order first read, with their tier,
    answer hash, the members' label codes (cells x members; -1 no vote) and probabilities
    (cells x members x 4), from the members' verdicts as columns."""
    stray = [name for name in table.judges if name not in members]
    if stray:  # a file in verdicts/<member>/ holds another judge's verdicts
        raise InputError([Problem(stray[0], None, "judge", f"verdicts of {stray[0]!r} in a member's folder "
                                  f"({', '.join(members)}): each judge's verdicts belong in its own folder")])
    parts = [table.question, table.model, table.variant, table.check]
    sizes = [max(len(table.questions), 1), max(len(table.models), 1), len(VARIANTS), max(len(table.checks), 1)]
    _, first, inverse = np.unique(row_key([p.astype(np.int64) for p in parts], sizes), return_index=True,
                                  return_inverse=True)
    order = np.argsort(first, kind="stable")  # cells in the order first read
    cell = np.empty(len(order), dtype=np.int64)
    cell[order] = np.arange(len(order))
    cell = cell[inverse.ravel()]
    answer = table.answer_hash if table.answer_hash is not None else np.full(len(table), -1)
    at = first[order]
    differs = np.flatnonzero(answer != answer[at][cell])
    if len(differs):
        row = at[cell[differs[0]]]
        key = (table.questions[table.question[row]], table.models[table.model[row]], VARIANTS[table.variant[row]])
        raise InputError([Problem(table.judges[table.judge[differs[0]]], None, "answer_hash", f"members graded "
                                  f"different versions of the response {key} (check {table.checks[table.check[row]]}): "
                                  "rejudge them on the same answers")])
    info = [{"key": (table.questions[table.question[r]], table.models[table.model[r]], VARIANTS[table.variant[r]],
                     table.checks[table.check[r]]), "tier": TIERS[table.tier[r]],
             "answer_hash": table.answer_hashes[answer[r]] if answer[r] >= 0 else None} for r in at.tolist()]
    member = np.array([members.index(name) for name in table.judges], dtype=np.int64)[table.judge]
    labels = np.full((len(info), len(members)), -1, dtype=np.int64)
    labels[cell, member] = np.where(table.verdict < len(JUDGE_LABELS), table.verdict, -1)
    probs = np.full((len(info), len(members), len(JUDGE_LABELS)), np.nan)
    probs[cell, member] = table.probs
    return info, labels, probs


@dataclass(frozen=True)
class JuryResult:
    """What `run_jury` wrote: one verdict per cell (`invalid` of them invalid) in `files`
    store units; `by_majority`: cells mean-probs decided by majority, no member having
    probabilities there."""

    name: str
    rule: str
    cells: int
    files: int
    by_majority: int
    invalid: int


def run_jury(run_dir: Path, members: list[str], rule: str, name: str) -> JuryResult:
    """Write the jury's verdicts and its record; a summary of what was written."""
    run_dir = Path(run_dir)
    files = _check(run_dir, members, rule, name)
    table = read_verdicts(files, check_hashes=False)
    info, labels, probs = _cells(table, members)
    identity = _jury_hash(rule, _member_hashes(members, table))
    old = verdict_files(run_dir, name)
    held = _member_hashes([name], read_verdicts(old, probs=False, answer_hashes=False, check_hashes=False))[name] \
        if old else []
    if held and held != [identity]:
        raise InputError([Problem(str(run_dir / "verdicts" / name), None, "settings_hash", f"the jury {name!r} was "
                                  "made from other members, rules or member settings: give another --name, or "
                                  "delete that folder")])
    result = aggregate(rule, labels, probs, members)
    out: dict[tuple[str, str], list[dict]] = {}
    for c, cell in enumerate(info):
        q, model, variant, check = cell["key"]
        votes = " ".join(f"{m}={VERDICTS[labels[c, k]] if labels[c, k] >= 0 else '-'}" for k, m in enumerate(members))
        p = None if result["probs"] is None or not np.isfinite(result["probs"][c]).all() else \
            dict(zip(JUDGE_LABELS, result["probs"][c].tolist()))
        out.setdefault((model, variant), []).append({
            "question_id": q, "model": model, "variant": variant, "judge": name, "check_id": check,
            "tier": cell["tier"], "verdict": VERDICTS[result["codes"][c]], "raw": f"jury {rule}: {votes}",
            "probs": p, "method": f"jury-{rule}", "settings_hash": identity, "answer_hash": cell["answer_hash"]})
    for (model, variant), rows in out.items():
        replace_unit(store_path(run_dir, name, model, variant), rows)
    confusion = None if result["confusion"] is None else \
        {m: c.tolist() for m, c in result["confusion"].items()}
    write_json(jury_path(run_dir, name), {
        "kind": "gamut-local jury", "schema_version": 1, "name": name, "rule": rule, "members": members,
        "settings_hash": identity, "label_order": list(JUDGE_LABELS), "cells": len(info),
        "confusion": confusion})
    # mean-probs decides a cell where no member has probabilities by majority: say how many.
    by_majority = int((~np.isfinite(result["probs"]).all(axis=1)).sum()) if rule == "mean-probs" else 0
    return JuryResult(name=name, rule=rule, cells=len(info), files=len(out), by_majority=by_majority,
                      invalid=int((result["codes"] == VERDICTS.index("invalid")).sum()))
