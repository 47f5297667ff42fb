"""The paper's fixed vocabulary, as `Literal` types, and the integer codes the vectorised code uses.

Each tuple is derived from its type, so a word is spelled in exactly one place; codes are
positions in these tuples (`VERDICTS.index("missing") == 2` everywhere).
"""

from typing import Literal, get_args

Tier = Literal["answer_critical", "valuable", "context"]
# What a judge may answer; `invalid` is ours, for output we could not read.
JudgeLabel = Literal["meets", "partially_meets", "missing", "contradicts"]
VerdictLabel = Literal[JudgeLabel, "invalid"]
Variant = Literal["multimodal", "text_only"]

TIERS: tuple[str, ...] = get_args(Tier)
JUDGE_LABELS: tuple[str, ...] = get_args(JudgeLabel)
VERDICTS: tuple[str, ...] = get_args(VerdictLabel)
VARIANTS: tuple[str, ...] = get_args(Variant)
# A record or run that names no variant is about the image + generic question.
DEFAULT_VARIANT: Variant = "multimodal"

# Model, judge and run names become file and folder names: no separators, no leading dot
# (so never `..`), short enough for any file system. The one pattern every name is held to.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}"

TIER_CODE = {name: i for i, name in enumerate(TIERS)}
VERDICT_CODE = {name: i for i, name in enumerate(VERDICTS)}

TIER_WEIGHTS = (0.6, 0.3, 0.1)
PARTIAL_CREDIT = 0.5
CONTRADICTION_WEIGHT = -2.0


def demote(tier: str) -> str:
    """One tier lower; context stays context."""
    return TIERS[min(TIER_CODE[tier] + 1, len(TIERS) - 1)]

# The compiler's one setting (rubric/compiler.py): flexible lists with at most this many
# options get one check per option beyond the coverage check. A run's `compile` block sets it.
SMALL_POOL_MAX = 6

# Judge names that start with this are people (`gamut-local view --annotator NAME` writes as
# `human-NAME`); a model judge may not take one (config.JudgeSpec refuses it).
HUMAN_PREFIX = "human-"
