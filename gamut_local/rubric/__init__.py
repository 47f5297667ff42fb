"""Meta-rubric schema and the deterministic compiler."""

from gamut_local.rubric.compiler import (
    checks_for,
    compile_dataset,
    compile_item,
    compile_meta_rubric,
)
from gamut_local.rubric.schema import Check, MetaRubric

__all__ = ["Check", "MetaRubric", "checks_for", "compile_dataset", "compile_item", "compile_meta_rubric"]
