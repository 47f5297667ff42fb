"""The paper's fixed vocabulary and the integer codes the vectorised code uses.

Codes are positions in these tuples, so `VERDICTS.index("missing") == 2` everywhere.
"""

TIERS = ("answer_critical", "valuable", "context")
VERDICTS = ("meets", "partially_meets", "missing", "contradicts", "invalid")
# What a judge may answer; `invalid` is ours, for output we could not read.
JUDGE_LABELS = VERDICTS[:4]
VARIANTS = ("multimodal", "text_only")

TIER_CODE = {name: i for i, name in enumerate(TIERS)}
VERDICT_CODE = {name: i for i, name in enumerate(VERDICTS)}

TIER_WEIGHTS = (0.6, 0.3, 0.1)
PARTIAL_CREDIT = 0.5
CONTRADICTION_WEIGHT = -2.0


def demote(tier: str) -> str:
    """One tier lower; context stays context."""
    return TIERS[min(TIER_CODE[tier] + 1, len(TIERS) - 1)]
