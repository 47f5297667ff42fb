"""The authoring configs: DRAFT.yaml (`gamut-local draft`) and AUDIT.yaml (`gamut-local audit`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gamut_local.config.base import LocatedConfig
from gamut_local.config.models import ModelSpec


class DraftSpec(LocatedConfig):
    """DRAFT.yaml: which model drafts meta-rubrics, and the bounds its output is held to."""

    model: ModelSpec = Field(examples=["qwen3-vl-8b"], description=(
        "The model that drafts: a name under configs/models/ or inline model settings."))
    max_retries: int = Field(default=2, ge=0, description=(
        "Re-asks with the validation errors; after them the question is recorded as failed."))
    chunk_size: int = Field(default=64, ge=1, description="Questions per engine call and atomic append.")
    # Bounds written into the JSON schema the output is constrained to: they keep a drafted
    # meta-rubric to paper size (~15 checks) and stop a weak model from writing forever.
    max_items: int = Field(default=12, ge=1, description="Most items in one drafted meta-rubric.")
    max_list: int = Field(default=10, ge=2, description=(
        "Most elements, options, steps, entities or aspects in one item."))
    max_chars: int = Field(default=300, ge=20, description="Longest text of any one field.")
    max_snippet_chars: int = Field(default=1500, ge=100, description="Evidence text shown per snippet.")


class AuditSpec(LocatedConfig):
    """AUDIT.yaml: which model re-reads each cited snippet, and what happens to ungrounded items."""

    model: ModelSpec = Field(examples=["qwen3-vl-8b"], description=(
        "The model that re-reads each cited snippet: a name under configs/models/ or inline settings."))
    ungrounded: Literal["keep", "demote", "drop"] = Field(default="demote", description=(
        "What happens to an item no snippet supports: kept, demoted one tier, or dropped."))
    partial_counts: bool = Field(default=False, description="Whether `partially_supported` grounds an item.")
    min_coverage: float = Field(default=0.5, ge=0.0, le=1.0, description=(
        "A question whose grounded share of items is below this is reported as poorly covered."))
    chunk_size: int = Field(default=256, ge=1, description="Requests per engine call and atomic append.")
    max_snippet_chars: int = Field(default=1500, ge=100, description="Evidence text shown per snippet.")
