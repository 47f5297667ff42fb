"""Prompt templates sent to candidates and judges, each with the hash records carry.

Imports only `vocab`; `template_hashes` is what the manifest records.
"""

from __future__ import annotations

from gamut_local.prompts.audit import AUDIT_TEMPLATE_HASH
from gamut_local.prompts.candidate import CANDIDATE_TEMPLATE_HASH
from gamut_local.prompts.draft import DRAFT_TEMPLATE_HASH
from gamut_local.prompts.judge import JUDGE_TEMPLATE_HASH


def template_hashes() -> dict[str, str]:
    return {"judge": JUDGE_TEMPLATE_HASH, "candidate": CANDIDATE_TEMPLATE_HASH,
            "draft": DRAFT_TEMPLATE_HASH, "audit": AUDIT_TEMPLATE_HASH}
