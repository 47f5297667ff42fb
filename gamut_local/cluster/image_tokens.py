"""Prompt tokens one image costs each model family, for the cost plan (`gamut-local plan`).

`image_tokens(spec, width, height)` gives `(tokens, source)`: the tokens the model's processor
puts in the prompt for one image of `width` x `height` pixels (the GAMUT release's images are
960 wide and 1280 high: egocentric photographs bounded by gamut_local/data/crag_mm.py), and a
line saying where the figure came from. It counts what the language model reads: the image's
feature tokens plus the markers around them. The vision encoder's own work is not counted.
Whether a prompt carries an image at all (`vision: false`, a judge with `sees_image: false`) is
the caller's question.

The figures follow the processors vLLM 0.32.0 runs, with the settings the model config gives:
- Qwen-VL: `smart_resize` to multiples of patch x merge pixels (Qwen3-VL 16 x 2, Qwen2/2.5-VL
  14 x 2) within the pixel caps, then one token per merged patch (vllm/model_executor/models/
  qwen3_vl.py:959-1036, the arithmetic of transformers' qwen2_vl `smart_resize`), plus
  <|vision_start|> and <|vision_end|> (qwen3_vl.py:1141). The caps are those `engine_kwargs`
  passes: `engine.extra.mm_processor_kwargs` where set (it replaces the rest), else
  `engine.min_pixels`/`engine.max_pixels`, a cap left unset being the checkpoint's own.
- Gemma 3: a fixed 896 px square, 256 tokens (vllm/model_executor/models/gemma3_mm.py:197-213,
  no pan-and-scan crops unless `do_pan_and_scan` is set), plus <start_of_image>, <end_of_image>.
- InternVL (`-hf`): 448 px tiles of 256 tokens each, the tile grid whose aspect ratio is
  closest to the image's among 1..`max_patches` tiles, plus a thumbnail tile when there is more
  than one (vllm/model_executor/models/interns1.py:197-213 calls transformers'
  GotOcr2ImageProcessor.get_number_of_image_patches), plus <img> and </img>.
- Pixtral and Mistral Small 3.1 (mistral_common's ImageEncoder, vllm/model_executor/models/
  pixtral.py): the image scaled to fit the encoder's largest side, one token per patch x merge
  pixels, one [IMG_BREAK]/[IMG_END] per row: rows x (columns + 1). Pixtral-12B: 1024 px,
  patch 16, no merge; Mistral Small 3.1: 1540 px, patch 14, merge 2 (their params.json).
- Llama 3.2 Vision (Mllama): one <|image|> token; the image reaches the language model
  through cross-attention (up to 4 tiles of 560 px, 1,601 vision states each), not the prompt.
- Any other model: `default` tokens, and the source line says the family is unknown.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from gamut_local.config import ModelSpec

DEFAULT_IMAGE_TOKENS = 1024  # a 1024x1024 image at Qwen3-VL's 32 px per token

# Qwen-VL family: (patch, merge, the checkpoint's own min_pixels, max_pixels), from each
# family's preprocessor_config.json.
QWEN_VL = {
    "qwen3-vl": (16, 2, 65536, 16777216),
    "qwen2.5-vl": (14, 2, 3136, 12845056),
    "qwen2-vl": (14, 2, 3136, 12845056),
}
# Mistral-format encoders: (largest side, patch, spatial merge).
MISTRAL_ENCODER = {"pixtral": (1024, 16, 1), "mistral-small-3": (1540, 14, 2)}
GEMMA3_TOKENS, GEMMA3_PAN_AND_SCAN_CROPS = 256, 4
INTERNVL_TILE, INTERNVL_TILE_TOKENS, INTERNVL_MAX_TILES = 448, 256, 12
MARKERS = 2  # the begin and end tokens around one image's features

# Family names as configs spell them (hub ids, folder names, config names), first match wins;
# then the model_type of a local folder's config.json.
_FAMILIES = [(re.compile(p), f) for p, f in (
    (r"qwen3[-_.]?vl", "qwen3-vl"), (r"qwen2[-_.]?5[-_.]?vl", "qwen2.5-vl"), (r"qwen2[-_.]?vl", "qwen2-vl"),
    (r"gemma[-_.]?3(?![0-9n])", "gemma-3"), (r"internvl", "internvl"), (r"pixtral", "pixtral"),
    (r"mistral[-_.]?small[-_.]?3", "mistral-small-3"),
    (r"llama[-_.]?3\.2[-_.]?\d+b[-_.]?vision|mllama", "mllama"))]
_MODEL_TYPES = {"qwen3_vl": "qwen3-vl", "qwen3_vl_moe": "qwen3-vl", "qwen2_5_vl": "qwen2.5-vl",
                "qwen2_vl": "qwen2-vl", "gemma3": "gemma-3", "internvl": "internvl",
                "mistral3": "mistral-small-3", "mllama": "mllama"}


def family(spec: ModelSpec) -> str | None:
    """The model family of `spec`, from its name, path or served weights; else from the
    model_type in a local folder's config.json; None when neither says."""
    serve = spec.server.serve if spec.server is not None and spec.server.serve else ""
    text = " ".join((spec.name, spec.path, serve)).lower()
    for pattern, name in _FAMILIES:
        if pattern.search(text):
            return name
    try:
        model_type = json.loads((Path(spec.path) / "config.json").read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    return _MODEL_TYPES.get(model_type)


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen-VL's resize: (height, width) rounded to multiples of `factor`, scaled (aspect
    ratio kept) into [min_pixels, max_pixels]; the arithmetic of transformers' qwen2_vl
    `smart_resize`, which vLLM's Qwen-VL processors call."""
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def _processor_kwargs(spec: ModelSpec) -> dict | None:
    """`engine.extra.mm_processor_kwargs` (it replaces the caps the engine would pass); None if unset."""
    kwargs = spec.engine.extra.get("mm_processor_kwargs")
    return kwargs if isinstance(kwargs, dict) else None


def _qwen(spec: ModelSpec, name: str, width: int, height: int) -> tuple[int, str]:
    patch, merge, lo, hi = QWEN_VL[name]
    kwargs = _processor_kwargs(spec)
    if kwargs is not None:
        size = kwargs.get("size") if isinstance(kwargs.get("size"), dict) else {}
        lo = size.get("shortest_edge", kwargs.get("min_pixels", lo))
        hi = size.get("longest_edge", kwargs.get("max_pixels", hi))
        where = "engine.extra.mm_processor_kwargs"
    else:
        lo = spec.engine.min_pixels if spec.engine.min_pixels is not None else lo
        hi = spec.engine.max_pixels if spec.engine.max_pixels is not None else hi
        where = "engine.min_pixels/max_pixels"
    h, w = smart_resize(height, width, patch * merge, lo, hi)
    tokens = (h // patch) * (w // patch) // merge ** 2 + MARKERS
    return tokens, (f"{name}: {width}x{height} resized to {w}x{h} (patch {patch}, merge {merge}, "
                    f"pixels {lo}..{hi} from {where} or the checkpoint's defaults) + 2 markers")


def _gemma3(spec: ModelSpec) -> tuple[int, str]:
    kwargs = _processor_kwargs(spec) or {}
    if kwargs.get("do_pan_and_scan"):
        crops = int(kwargs.get("pan_and_scan_max_num_crops", GEMMA3_PAN_AND_SCAN_CROPS))
        return ((crops + 1) * GEMMA3_TOKENS + MARKERS, f"gemma-3: pan-and-scan on: at most {crops} crops "
                f"+ the image, {GEMMA3_TOKENS} tokens each (an upper bound)")
    return (GEMMA3_TOKENS + MARKERS,
            f"gemma-3: fixed {GEMMA3_TOKENS} tokens per image (896 px square) + 2 markers")


def internvl_tiles(width: int, height: int, min_tiles: int, max_tiles: int) -> tuple[int, int]:
    """(columns, rows) of 448 px tiles for an image: the grid whose width/height ratio is nearest
    the image's; on a tie the later (more tiles) grid while the image covers over half of it
    (transformers' got_ocr2 `get_optimal_tiled_canvas`)."""
    grids = sorted(((c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1)
                    if min_tiles <= c * r <= max_tiles), key=lambda g: g[0] * g[1])
    aspect, best, best_diff = width / height, (1, 1), float("inf")
    for cols, rows in grids:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and width * height > 0.5 * INTERNVL_TILE ** 2 * cols * rows:
            best = (cols, rows)
    return best


def _internvl(spec: ModelSpec, width: int, height: int) -> tuple[int, str]:
    kwargs = _processor_kwargs(spec) or {}
    # The -hf checkpoints' processor reads max_patches; the original ones, max_dynamic_patch.
    key = "max_patches" if spec.path.lower().endswith("-hf") else "max_dynamic_patch"
    max_tiles = int(kwargs.get(key, INTERNVL_MAX_TILES))
    min_tiles = int(kwargs.get("min_patches" if key == "max_patches" else "min_dynamic_patch", 1))
    tiles = 1
    if max_tiles > 1:
        cols, rows = internvl_tiles(width, height, min_tiles, max_tiles)
        tiles = cols * rows + (1 if cols * rows > 1 else 0)  # the thumbnail
    return (tiles * INTERNVL_TILE_TOKENS + MARKERS,
            f"internvl: {tiles} tiles of {INTERNVL_TILE_TOKENS} tokens ({key} {max_tiles}, thumbnail "
            f"included) + 2 markers")


def _mistral(name: str, width: int, height: int) -> tuple[int, str]:
    side, patch, merge = MISTRAL_ENCODER[name]
    ratio = max(width / side, height / side)
    w, h = (max(round(width / ratio), 1), max(round(height / ratio), 1)) if ratio > 1 else (width, height)
    cols, rows = (w - 1) // (patch * merge) + 1, (h - 1) // (patch * merge) + 1
    return rows * (cols + 1), (f"{name}: {width}x{height} fit to {side} px, {cols}x{rows} tokens of "
                               f"{patch * merge} px, one break/end token per row")


def image_tokens(spec: ModelSpec, width: int = 960, height: int = 1280,
                 default: int = DEFAULT_IMAGE_TOKENS) -> tuple[int, str]:
    """(tokens one `width` x `height` image adds to a prompt of `spec`, where the figure came
    from). A family this module does not know gets `default` and a source line saying so."""
    name = family(spec)
    if name in QWEN_VL:
        return _qwen(spec, name, width, height)
    if name == "gemma-3":
        return _gemma3(spec)
    if name == "internvl":
        return _internvl(spec, width, height)
    if name in MISTRAL_ENCODER:
        return _mistral(name, width, height)
    if name == "mllama":
        return 1, "mllama: one <|image|> token; the image enters through cross-attention, not the prompt"
    return default, (f"unknown model family for {spec.name!r} ({spec.path}): "
                     f"assumed {default} tokens per image")
