"""What each record's identity covers: the hashes a record carries, and what makes it current.

A record is *current* when every identity hash it carries equals the one computed now from the
run's inputs; otherwise it is *stale* (made for another question text, check wording, answer or
judge set-up) and is never scored or resumed as if it were current. One rule per hash, here:

| record  | field           | covers                                                              |
|---------|-----------------|---------------------------------------------------------------------|
| answer  | `settings_hash` | the model's settings (`config.ModelSpec.settings_hash`)             |
| answer  | `prompt_hash`   | candidate template, the question text sent for the variant, the     |
|         |                 | image's bytes (multimodal)                                          |
| verdict | `settings_hash` | judge settings, judge template, `sees_image`, and the set-up as     |
|         |                 | resolved at run time (back end, engine build, readout, label tokens)|
| verdict | `check_hash`    | the check as judged: its text, tier and kind                        |
| verdict | `answer_hash`   | the graded response's text                                          |

Human verdicts carry `check_hash` and `answer_hash` of what the annotator was shown.
docs/outputs.md documents each field. An output file (scores, agreement, the report) names
its input files by path, size, mtime and sha256 (`file_record`) and is current while each
still is (`current_record`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from gamut_local.hashing import HASH_CHARS, file_sha256, short_hash  # noqa: F401 (re-exported)
from gamut_local.prompts.candidate import CANDIDATE_TEMPLATE_HASH
from gamut_local.prompts.judge import JUDGE_TEMPLATE_HASH

if TYPE_CHECKING:  # the config models cost score and agree 0.05 s to import; a hash needs none
    from gamut_local.config import JudgeSpec

ANSWER_IDENTITY = ("settings_hash", "prompt_hash")
VERDICT_IDENTITY = ("settings_hash", "check_hash", "answer_hash")


def answer_hash(response: str) -> str:
    """The graded response's identity (a verdict's `answer_hash`)."""
    return short_hash(response)


def check_hash(text: str, tier: str, kind: str) -> str:
    """A check as a judge sees and the scorer weighs it: the wording, the tier and the rule
    that made it. Compile settings that change a check change one of these, so they need no
    field of their own; a check whose id survives an edit keeps its verdicts only if all
    three are unchanged."""
    return short_hash(text, tier, kind)


def work_key(questions: list, checks: dict | None = None) -> str:
    """What a run's SLURM tasks work on: every question as sent in each variant (text and image
    path) and, for judging (`checks`: question id -> its compiled checks), every check as
    judged. Computed once per graph; `done_key` joins it with each engine's settings."""
    parts = []
    for q in questions:
        parts += [q.question_id, q.text_for("multimodal")[0], q.text_for("text_only")[0], q.image or ""]
        if checks is not None:
            parts += [check_hash(c.text, c.tier, c.kind) for v in ("multimodal", "text_only")
                      for c in q.checks_for_variant(v, checks[q.question_id])]
    return short_hash(*parts)


def done_key(settings_hash: str, work: str) -> str:
    """What a finished SLURM task's work was made for, written into its done markers:
    `settings_hash` (the engine's settings; a judge's with what made the answers it grades) and
    `work` (`work_key`). A marker holding another key is not done: the task reruns, and its
    stage redoes only what is stale."""
    return short_hash(settings_hash, work)


def prompt_hash(question_text: str, image_sha256: str | None) -> str:
    """What a candidate was asked: template, question text, and the image's content hash."""
    return short_hash(CANDIDATE_TEMPLATE_HASH, question_text, image_sha256 or "no image")


def judge_settings_hash(spec: JudgeSpec, resolved: dict[str, str] | None = None) -> str:
    """What determines a verdict besides the answer and the check: the judge's settings, the
    prompt template, `sees_image`, and `resolved`, the set-up the engine resolves at run time
    (`engines.judge_identity`): with `backend: auto` one config may be served by two engines
    that read labels differently, and their verdicts must never pool under one hash."""
    parts = [spec.settings_hash(), JUDGE_TEMPLATE_HASH, f"sees_image={spec.sees_image}"]
    if resolved:
        parts.append(json.dumps(resolved, sort_keys=True))
    return short_hash(*parts)


def stale_fields(record: dict, current: dict[str, str | None]) -> list[str]:
    """The identity fields on which `record` differs from `current` (a field whose current
    value is None is not compared: nothing to compare it with). A field the record lacks
    counts as differing: a record made before that hash existed cannot be shown current."""
    return [f for f, want in current.items() if want is not None and record.get(f) != want]


# ---------------------------------------------------------------- an output's input files

def file_record(path: Path) -> dict:
    """Path, size, mtime and content hash of an input file: what an output names it by."""
    stat = path.stat()
    return {"path": str(path), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": file_sha256(path)}


def current_record(old: dict) -> dict | None:
    """`old` still describes its file? Same size and mtime: trust the hash (as git's index
    does); else hash again. Returns the file's record now, or None if it is gone. The one
    rule for whether an output is current with its inputs (`reporting.tables`)."""
    path = Path(old.get("path", ""))
    try:
        stat = path.stat()
    except OSError:
        return None
    if stat.st_size == old.get("bytes") and stat.st_mtime_ns == old.get("mtime_ns"):
        return dict(old)
    return file_record(path)
