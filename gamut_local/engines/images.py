"""Images in engine conversations: which models see them, and the form a server takes."""

from __future__ import annotations

import json
from pathlib import Path

from gamut_local.config import JudgeSpec, ModelSpec


def is_multimodal(path: str) -> bool:
    """Whether a model folder holds a vision-language model: its config has a vision tower
    (`vision_config` in a Hugging Face config.json, `vision_encoder` in the params.json of a
    Mistral-format folder such as Pixtral's)."""
    for name, key in (("config.json", "vision_config"), ("params.json", "vision_encoder")):
        try:
            config = json.loads((Path(path) / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(config, dict) and config.get(key):
            return True
    return False


def image_capacity(spec: ModelSpec) -> dict[str, int]:
    """Images a prompt of this model may carry, where that is fewer than its engine settings
    say: none for a judge that does not see the image or a model without vision (vLLM would
    otherwise reserve encoder memory and image tokens for one)."""
    sees = spec.sees_image if isinstance(spec, JudgeSpec) else spec.vision
    return {} if sees else {"image": 0, "video": 0}


def _data_url(image) -> str:
    import base64
    import io

    buf = io.BytesIO()
    image.save(buf, format="PNG")  # lossless: the model sees the same pixels as with image_pil
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def image_parts_as_urls(conversations: list[list[dict]]) -> list[list[dict]]:
    """`image_pil` parts as `image_url` data URLs: vLLM's Mistral tokenizer mode (Pixtral)
    takes only those. Each distinct image is encoded once."""
    urls: dict[int, str] = {}

    def part(p: dict) -> dict:
        if p.get("type") != "image_pil":
            return p
        key = id(p["image_pil"])
        if key not in urls:
            urls[key] = _data_url(p["image_pil"])
        return {"type": "image_url", "image_url": {"url": urls[key]}}

    return [[{**m, "content": [part(p) for p in m["content"]]} if isinstance(m.get("content"), list) else m
             for m in conv] for conv in conversations]
