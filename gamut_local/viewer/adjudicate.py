"""Writing a human verdict: checked against the run, appended at once, newest wins.

Each verdict is one atomic append (`rundir.store.append_jsonl`: one write + fsync) to
`verdicts/human-<annotator>/<model>.<variant>.jsonl`, an ordinary verdict record of judge
`human-<annotator>` plus `note`, `annotated_at` and `revision` (1 for a cell's first verdict by
this annotator, +1 each time they change their mind; the file keeps every revision). Like a
model judge's, it carries the `check_hash` and `answer_hash` of what the annotator was shown
(`rundir.identity`), so a reworded check or a regenerated answer makes it stale, not gold.

The file has other writers while the viewer runs: `verdicts import` of the person's own
verdicts, another viewer of the same annotator. So every append holds the file's task lock
(`rundir.task_lock`, waiting its turn like the store's short writes) and numbers its revision
from what the file holds then, never from what the viewer read when it started; what the
others added to that file is taken into the viewer's memory at the same time.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from datetime import datetime, timezone

from pathlib import Path

from pydantic import ValidationError

from gamut_local.data.records import Verdict
from gamut_local.errors import InputError, Problem, pydantic_problems
from gamut_local.rundir import task_lock
from gamut_local.rundir.human import human_judge
from gamut_local.rundir.layout import check_name, verdicts_path
from gamut_local.rundir.store import append_jsonl, read_jsonl
from gamut_local.viewer.body import Field
from gamut_local.viewer.index import RunIndex, read_humans
from gamut_local.vocab import JUDGE_LABELS, TIERS

NOTE_MAX = 2000
# What a verdict request holds, exactly (viewer.body.read_json_body checks names and types).
VERDICT_FIELDS = {"question_id": Field(), "model": Field(), "variant": Field(), "check_id": Field(),
                  "verdict": Field(), "note": Field(required=False), "sample": Field(required=False)}
# In team mode a body may name its writer; the app refuses it unless it is the signed-in one.
TEAM_FIELDS = {**VERDICT_FIELDS, "annotator": Field(required=False), "judge": Field(required=False)}
# One append at a time to a person's file within the viewer (a task lock is re-entrant within
# a process, so it does not order this process's own threads); writes of different people's
# files go side by side. `_INDEX` orders the swaps of `index.humans`.
_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_MUTEX = threading.Lock()
_INDEX = threading.Lock()
# `index.computed[KNOWN]`: per person's file, its (size, mtime, inode) after this index's last
# read or append of it, and the top revision of each cell then. While the file is as the
# viewer left it, nobody else wrote it, and it need not be read again for the next revision.
KNOWN = "known_files"


def _file_lock(path: Path) -> threading.Lock:
    with _LOCKS_MUTEX:
        return _LOCKS.setdefault(path, threading.Lock())


def _stamp(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class Busy(Exception):
    """Another process holds the person's file for longer than a short write waits."""


def record_verdict(index: RunIndex, annotator: str, body: dict) -> dict:
    """Validate a verdict from the queue (a body read with VERDICT_FIELDS, so its fields are
    strings already) and append it; returns the record written."""
    judge = human_judge(annotator)
    fields = {k: body[k] for k in ("question_id", "model", "variant", "check_id", "verdict")}
    note = body.get("note") or None
    if note is not None and len(note) > NOTE_MAX:
        raise InputError([Problem("request", None, "note", f"a string of at most {NOTE_MAX} characters")])
    if fields["verdict"] not in JUDGE_LABELS:
        raise InputError([Problem("request", None, "verdict", f"one of {', '.join(JUDGE_LABELS)}")])
    cell = index.cell_of(fields["question_id"], fields["model"], fields["variant"], fields["check_id"])
    if cell is None:
        raise LookupError("no judged (response, check) cell with these names in this run")
    qid, model, variant, check_id = index.cell_names(cell)  # names as the run spells them
    check_name(model, "model", "request")
    drawn = _sample_fields(index, body.get("sample") or None, (model, variant, qid))
    key = (qid, model, variant, check_id)
    path = verdicts_path(index.run_dir, judge, model, variant)
    with _file_lock(path), _holding(path):
        top = _on_disk(path, index, judge)
        rec = {"question_id": qid, "model": model, "variant": variant, "judge": judge,
               "check_id": check_id, "tier": TIERS[int(index.cells.tier[cell])],
               "verdict": fields["verdict"], "raw": None, "probs": None, "note": note,
               **index.shown_identity(qid, model, variant, check_id),
               "annotated_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
               "revision": top.get(key, 0) + 1, **drawn}
        try:
            Verdict.model_validate(rec)
        except ValidationError as e:
            raise InputError(pydantic_problems(e, "request", None))
        append_jsonl(path, [rec])
        top[key] = rec["revision"]
        index.computed.setdefault(KNOWN, {})[path] = (_stamp(path), top)
        _replace(index, judge, {key: rec})
    return rec


def _holding(path: Path) -> ExitStack:
    """The person's file's task lock, taken (waiting `task_lock.WAIT` for its turn), to be
    held for a `with` block; Busy where another process keeps it longer."""
    stack = ExitStack()
    try:
        stack.enter_context(task_lock.hold([path], wait=task_lock.WAIT))
    except task_lock.Held as e:
        raise Busy("; ".join(str(p) for p in e.problems)) from None
    return stack


def _on_disk(path: Path, index: RunIndex, judge: str) -> dict[tuple, int]:
    """The highest revision of each cell in the person's file as it is now, the lock held;
    the file's newest verdicts (another writer's included) replace the viewer's. Read again
    only where the file changed since the viewer last read or appended to it."""
    stamp = _stamp(path)
    if stamp is None:
        return {}
    known = index.computed.get(KNOWN, {}).get(path)
    if known is not None and known[0] == stamp:
        return dict(known[1])
    top: dict[tuple, int] = {}
    for _, r in read_jsonl(path, allow_empty=True):
        key = (r.get("question_id"), r.get("model"), r.get("variant"), r.get("check_id"))
        rev = r.get("revision")
        top[key] = max(top.get(key, 0), rev if isinstance(rev, int) and not isinstance(rev, bool) else 1)
    _replace(index, judge, read_humans([path]).get(judge, {}))
    index.computed.setdefault(KNOWN, {})[path] = (stamp, dict(top))
    return top


def _replace(index: RunIndex, judge: str, records: dict) -> None:
    """Put `records` into the judge's verdicts by replacing the dicts, never changing one in
    place: pages read `index.humans` in other threads while a verdict is written, and a dict
    they iterate must not change size under them."""
    with _INDEX:
        index.humans = {**index.humans, judge: {**index.humans.get(judge, {}), **records}}
        index.humans_version += 1
        # What changed, in order, for those who keep results per judge up to date (team_pages).
        index.computed.setdefault(("changed", judge), []).extend(records)


def _sample_fields(index: RunIndex, name: str | None, response: tuple[str, str, str]) -> dict:
    """A verdict made in a calibration sample's queue carries the sample's id and the
    response's inclusion probability (what `--correct-with` weighs it by and checks it against);
    a response the sample did not draw is refused."""
    if name is None:
        return {}
    from gamut_local.analysis.design import probability_of

    design = index.samples.get(name)
    if design is None:
        raise InputError([Problem("request", None, "sample", f"no calibration sample {name!r} in this run "
                                  f"({', '.join(sorted(index.samples)) or 'none'})")])
    prob = probability_of(design).get(response)
    if prob is None:
        raise InputError([Problem("request", None, "sample", f"sample {name!r} did not draw this response")])
    return {"sample_id": design.sample_id, "inclusion_probability": prob}


def annotated_cells(index: RunIndex, judge: str):
    """Cell indices this human judge has a verdict on (unknown cells left out)."""
    import numpy as np

    cells = [index.cell_of(*k) for k in index.humans.get(judge, {})]
    return np.array(sorted(c for c in cells if c is not None), dtype=np.int64)
