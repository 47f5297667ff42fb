"""Authoring test support: a small `draft` config for SmolLM2 with the suite's engine
settings, and the near-duplicate rule's all-pairs oracle."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.engines import VLLM_CPU_TEST_ENGINE


def write_draft_config(folder: str | Path, model_path: str, max_tokens: int, max_retries: int = 1) -> Path:
    """A `draft` config for SmolLM2 on vllm-cpu with the test suite's engine settings (YAML
    takes the JSON mapping), bounded
    small (two items, two list elements, 40 characters) so a tiny model finishes quickly."""
    cfg = Path(folder) / "draft.yaml"
    cfg.write_text(f"""model:
  name: smollm2
  path: {model_path}
  backend: vllm
  vision: false
  engine: {json.dumps(VLLM_CPU_TEST_ENGINE.model_dump(mode="json", exclude_unset=True))}
  sampling: {{max_tokens: {max_tokens}}}
max_retries: {max_retries}
max_items: 2
max_list: 2
max_chars: 40
""")
    return cfg


def all_pairs_near_duplicates(words: list[set[str]], groups: list, threshold: float) -> dict:
    """The duplicate rule's search as it was, every pair compared: j -> the first i < j of
    another group with Jaccard >= threshold. The oracle for `rubric.near_duplicates.first_near_duplicates`
    in its tests and scripts/bench_authoring.py (quadratic: keep it to a few thousand sets)."""
    found = {}
    for j in range(len(words)):
        for i in range(j):
            union = words[i] | words[j]
            jaccard = len(words[i] & words[j]) / len(union) if union else 1.0
            if (groups[j] is None or groups[i] != groups[j]) and jaccard >= threshold:
                found[j] = i
                break
    return found
