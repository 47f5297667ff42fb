"""Human verdicts: who may write them, where, and how a later one replaces an earlier one.

An annotator `NAME` is the judge `human-NAME`; the viewer appends each verdict at once to
`verdicts/human-NAME/<model>.<variant>.jsonl`, so every stage reads it like any judge's.
Changing your mind appends a newer record for the same (question, model, variant, check):
the file keeps the history and readers keep the LAST record per key (one annotator writes
one file, so file order is time order). Model judges' files never repeat a key; for them a
repeat stays an error. `revises` is that rule, called by `data.records.load_records`.
"""

from __future__ import annotations

import fnmatch
import re

from gamut_local.errors import InputError, Problem
from gamut_local.vocab import HUMAN_PREFIX

# Becomes part of a directory name: short, lower-case, no dots (no `..`), no separators.
_ANNOTATOR = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


def check_annotator(name: str, source: str = "--annotator") -> str:
    """The annotator name, or an InputError saying which names are allowed."""
    if not isinstance(name, str) or not _ANNOTATOR.fullmatch(name):
        raise InputError([Problem(source, None, "", f"{name!r} is not an annotator name: use 1-40 "
                                  "lower-case letters, digits, _ or -, starting with a letter or digit")])
    return name


def human_judge(annotator: str) -> str:
    return HUMAN_PREFIX + check_annotator(annotator)


def is_human(judge: str) -> bool:
    return judge.startswith(HUMAN_PREFIX)


def is_gold(judge: str, pattern: str) -> bool:
    """Whether a gold pattern (`fnmatch`, case-sensitive, e.g. `human-*`) names this judge."""
    return fnmatch.fnmatchcase(judge, pattern)


def gold_judges(judges: list[str], pattern: str, option: str | None = None) -> list[int]:
    """Positions of the judges a gold pattern names; with `option` (the option that gave the
    pattern), an InputError naming it where it names none: a typo would correct or calibrate
    against nothing."""
    found = [j for j, name in enumerate(judges) if is_gold(name, pattern)]
    if option is not None and not found:
        raise InputError([Problem(option, None, "", f"no judge matches {pattern!r} (judges: "
                                  f"{', '.join(judges) or 'none'})")])
    return found


def revises(record: dict) -> bool:
    """Whether a record with an already-seen key replaces the earlier one (human verdicts)."""
    return is_human(record.get("judge", ""))
