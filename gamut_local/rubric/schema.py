"""The meta-rubric: typed items in importance tiers, grounded in evidence snippets.

Pydantic models with strict types and no unknown fields, so a typo in a hand-written rubric
is an error, not a silently ignored key.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gamut_local.vocab import Tier

NonEmpty = Annotated[str, Field(min_length=1)]


def repeated(ids) -> list[str]:
    """The ids given more than once, sorted: one pass and a set (rubrics of 100,000 items)."""
    seen: set = set()
    return sorted({i for i in ids if i in seen or seen.add(i)})


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Snippet(_Strict):
    id: NonEmpty
    title: NonEmpty
    url: str | None = None
    text: NonEmpty


class _Item(_Strict):
    id: NonEmpty
    tier: Tier
    # How checks name what the item is about: a noun phrase ("the ingredients of a cappuccino");
    # a list's subject without a determiner gets "the" ("... as one of the ingredients ...").
    subject: str | None = None
    evidence: list[NonEmpty] = []


class Simple(_Item):
    type: Literal["simple"]
    fact: NonEmpty


class StrictList(_Item):
    type: Literal["strict_list"]
    elements: Annotated[list[NonEmpty], Field(min_length=1)]
    meta_insight: str | None = None


class FlexibleList(_Item):
    type: Literal["flexible_list"]
    options: Annotated[list[NonEmpty], Field(min_length=1)]
    min_required: int
    extra_thresholds: list[int] | None = None
    meta_insight: str | None = None

    @model_validator(mode="after")
    def _thresholds(self):
        p = len(self.options)
        if not 1 <= self.min_required <= p:
            raise ValueError(f"min_required must be between 1 and the number of options ({p})")
        t = self.extra_thresholds or []
        if any(b <= a for a, b in zip(t, t[1:])):
            raise ValueError("extra_thresholds must be strictly increasing")
        if any(not self.min_required < x <= p for x in t):
            raise ValueError(f"extra_thresholds must lie in ({self.min_required}, {p}]")
        return self


class Step(_Strict):
    text: NonEmpty
    required: bool = True


class Process(_Item):
    type: Literal["process"]
    steps: Annotated[list[Step], Field(min_length=1)]
    check_full_order: bool = False
    meta_insight: str | None = None


class Relationship(_Item):
    type: Literal["relationship"]
    entities: Annotated[list[NonEmpty], Field(min_length=2)]
    aspects: Annotated[list[NonEmpty], Field(min_length=1)]


Item = Annotated[
    Union[Simple, StrictList, FlexibleList, Process, Relationship], Field(discriminator="type")
]


class MetaRubric(_Strict):
    items: Annotated[list[Item], Field(min_length=1)]
    snippets: list[Snippet] = []

    @model_validator(mode="after")
    def _references(self):
        dupes = repeated(i.id for i in self.items)
        if dupes:
            raise ValueError(f"item ids must be unique; repeated: {', '.join(dupes)}")
        known = {s.id for s in self.snippets}
        dupes = repeated(s.id for s in self.snippets)
        if dupes:  # evidence cites snippets by id: two with one id make a citation ambiguous
            raise ValueError(f"snippet ids must be unique; repeated: {', '.join(dupes)}")
        for item in self.items:
            missing = [e for e in item.evidence if e not in known]
            if missing:
                raise ValueError(f"item {item.id!r} cites unknown snippet ids: {', '.join(missing)}")
        return self


class Check(_Strict):
    """One self-contained binary rubric line, graded by a judge on its own."""

    check_id: NonEmpty
    text: NonEmpty
    tier: Tier
    kind: str = "given"  # which compiler rule made it; "given" for human-written checks
    source_item: str | None = None
    evidence: list[str] = []
