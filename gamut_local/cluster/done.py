"""Resuming a job graph: which tasks are done, from their markers in `<run>/slurm/done/`.

A job script touches one done marker per (system, shard) it finished, e.g.
`generate.<model>.<variant>.shard-<i>-of-<G>`, `judge.<judge>.<model>.<variant>.shard-<i>-of-<H>`,
`score`, `report`. Resubmitting submits only array tasks with a marker missing (a model added to
the run leaves every judging task one marker short: each reruns, loads the judge once and
grades only the new model's answers, the stages resuming from the files) and score/report
again whenever any judging is resubmitted. A marker holds the key of what its task's work was
made for (`identity.done_key`: the engine's settings, the questions, a judge's checks and what
made the answers it grades); one holding another key is not done, so a reworded check reruns
the judging tasks, each grading only what is stale. A requeued or rerun task never duplicates
a record. Markers are per shard count: changing the shard counts reruns every task, which then
finds its work on disk and ends without loading.
"""

from __future__ import annotations

from pathlib import Path

from gamut_local.cluster.graph import Job


def _done(marker: Path, key: str) -> bool:
    """A marker counts while it holds the key of the work now asked for (an empty key: while it
    exists); a marker left by other settings or other questions or checks does not."""
    if not key:
        return marker.exists()
    try:
        return marker.read_text(encoding="utf-8", errors="replace").strip() == key
    except OSError:  # missing, or not a file
        return False


def mark_pending(jobs: list[Job], done_dir: Path) -> None:
    """Which tasks still need to run: no done marker, or (score/report) anything upstream reruns."""
    by_key = {j.key: j for j in jobs}
    for job in jobs:
        job.pending = [i for i, task in enumerate(job.tasks) if not all(_done(done_dir / mk, job.done_key) for mk in task)]
        if not job.array and any(by_key[a].pending for a in job.after):
            job.pending = [0]
    for job in jobs:  # a judge server runs while any of its clients has work left
        if job.serves:
            job.pending = [0] if any(by_key[c].pending for c in job.serves) else []

