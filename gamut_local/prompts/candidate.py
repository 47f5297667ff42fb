"""The candidate prompt: the question as asked (and the image, for the multimodal variant)."""

from __future__ import annotations

from gamut_local.prompts.hashing import template_hash

# Candidates get the question as asked, nothing added: the benchmark measures the model's
# own answer. The image (multimodal variant) comes before the text, as in the Qwen-VL docs.
CANDIDATE_TEMPLATE = "{question}"

CANDIDATE_TEMPLATE_HASH = template_hash(CANDIDATE_TEMPLATE, "image-first")


def candidate_conversation(question: str, image=None, system_prompt: str | None = None) -> list[dict]:
    """One candidate request. `image` is a PIL image (multimodal variant) or None."""
    text = CANDIDATE_TEMPLATE.format(question=question)
    content = text if image is None else [{"type": "image_pil", "image_pil": image},
                                          {"type": "text", "text": text}]
    msgs = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return msgs + [{"role": "user", "content": content}]
