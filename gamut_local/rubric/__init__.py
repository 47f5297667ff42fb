"""Meta-rubric schema and the deterministic compiler."""

from .compiler import checks_for, compile_dataset, compile_item, compile_meta_rubric
from .schema import Check, MetaRubric

__all__ = ["Check", "MetaRubric", "checks_for", "compile_dataset", "compile_item", "compile_meta_rubric"]
