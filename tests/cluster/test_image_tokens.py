"""Image tokens per model family for the cost plan: each family's arithmetic equals the
processor code vLLM runs (transformers' smart_resize and GotOcr2 tiling, mistral_common's
image encoder), every shipped vision config gets a figure from its own family, and an unknown
family gets the default and says so."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gamut_local.cluster.image_tokens import (
    DEFAULT_IMAGE_TOKENS,
    family,
    image_tokens,
    internvl_tiles,
    smart_resize,
)
from gamut_local.config import PROJECT_ROOT, EngineArgs, JudgeSpec, ModelSpec, load_yaml_text

SIZES = [(960, 1280), (1280, 960), (1024, 1024), (640, 480), (3000, 200), (97, 131), (4000, 3000)]
CAPS = [(65536, 16777216), (262144, 1310720), (3136, 12845056), (256 * 32 * 32, 256 * 32 * 32)]


def _shipped(kind: str) -> list[ModelSpec]:
    cls = JudgeSpec if kind == "judges" else ModelSpec
    return [cls.model_validate({"name": p.stem, **load_yaml_text(p.read_text())})
            for p in sorted((PROJECT_ROOT / "configs" / kind).glob("*.yaml"))]


@pytest.mark.parametrize("factor", [28, 32])
def test_smart_resize_is_transformers_arithmetic(factor):
    qwen2_vl = pytest.importorskip("transformers.models.qwen2_vl.image_processing_qwen2_vl")
    for width, height in SIZES:
        for lo, hi in CAPS:
            assert smart_resize(height, width, factor, lo, hi) == qwen2_vl.smart_resize(
                height, width, factor=factor, min_pixels=lo, max_pixels=hi), (width, height, lo, hi)


def test_qwen3_vl_counts_merged_patches_within_the_configs_caps():
    spec = ModelSpec(name="qwen3-vl-8b", path="Qwen/Qwen3-VL-8B-Instruct")
    # 960x1280 is already a multiple of 32 and under the default cap of 1280 * 32 * 32 pixels:
    # (1280 / 16) * (960 / 16) patches / 4 merged + <|vision_start|> + <|vision_end|>.
    assert image_tokens(spec)[0] == 80 * 60 // 4 + 2 == 1202
    small = spec.model_copy(update={"engine": EngineArgs(min_pixels=65536, max_pixels=256 * 32 * 32)})
    h, w = smart_resize(1280, 960, 32, 65536, 256 * 32 * 32)
    tokens, source = image_tokens(small)
    assert tokens == (h // 16) * (w // 16) // 4 + 2 and tokens <= 256 + 2
    assert "engine.min_pixels/max_pixels" in source
    # extra.mm_processor_kwargs replaces the engine's caps (engine_kwargs applies extra last).
    kwargs = {"mm_processor_kwargs": {"size": {"shortest_edge": 65536, "longest_edge": 128 * 32 * 32}}}
    extra = spec.model_copy(update={"engine": EngineArgs(extra=kwargs)})
    assert image_tokens(extra)[0] <= 128 + 2
    qwen25 = ModelSpec(name="q", path="Qwen/Qwen2.5-VL-7B-Instruct", engine=EngineArgs(max_pixels=None))
    h, w = smart_resize(1280, 960, 28, 3136, 12845056)
    assert image_tokens(qwen25)[0] == (h // 14) * (w // 14) // 4 + 2


def test_internvl_tiles_are_transformers_tiling():
    got_ocr2 = pytest.importorskip("transformers.models.got_ocr2.image_processing_got_ocr2")
    for max_tiles in (1, 2, 6, 12):
        processor = got_ocr2.GotOcr2ImageProcessor(size={"height": 448, "width": 448},
                                                   crop_to_patches=True, min_patches=1, max_patches=max_tiles)
        for width, height in SIZES:
            cols, rows = internvl_tiles(width, height, 1, max_tiles)
            ours = 1 if max_tiles == 1 else cols * rows + (cols * rows > 1)
            theirs = processor.get_number_of_image_patches(height, width, {})
            assert ours == theirs, (width, height, max_tiles)
    spec = ModelSpec(name="i", path="OpenGVLab/InternVL3-8B-hf",
                     engine=EngineArgs(extra={"mm_processor_kwargs": {"max_patches": 6}}))
    assert image_tokens(spec)[0] == (2 * 3 + 1) * 256 + 2  # a 2x3 grid and the thumbnail
    assert image_tokens(spec.model_copy(update={"engine": EngineArgs()}))[0] == (3 * 4 + 1) * 256 + 2


@pytest.mark.parametrize("path, side, patch, merge", [
    ("mistralai/Pixtral-12B-2409", 1024, 16, 1),
    ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", 1540, 14, 2)])
def test_mistral_encoders_count_as_mistral_common(path, side, patch, merge):
    image = pytest.importorskip("mistral_common.tokens.tokenizers.image")
    chunk = pytest.importorskip("mistral_common.protocol.instruct.chunk")
    from PIL import Image

    encoder = image.ImageEncoder(image.ImageConfig(image_patch_size=patch, max_image_size=side,
                                                   spatial_merge_size=merge),
                                 image.SpecialImageIDs(img=10, img_break=12, img_end=13))
    spec = ModelSpec(name="m", path=path)
    for width, height in SIZES:
        expected = len(encoder(chunk.ImageChunk(image=Image.new("RGB", (width, height)))).tokens)
        assert image_tokens(spec, width, height)[0] == expected, (width, height)


def test_every_shipped_vision_config_gets_its_familys_figure():
    figures = {}
    for spec in _shipped("models") + _shipped("judges"):
        if not spec.vision or spec.name == "my-model-7b":  # EXAMPLE.yaml names no real model
            continue
        tokens, source = image_tokens(spec)
        assert family(spec) is not None and "unknown" not in source, spec.name
        assert tokens > 0
        figures[spec.name] = tokens
    assert figures["qwen3-vl-235b-a22b"] == figures["qwen3-vl-235b-a22b-fp8-served"] == 1202
    assert figures["gemma-3-27b"] == 258 and figures["internvl3-38b"] == 7 * 256 + 2
    assert figures["pixtral-12b"] == 64 * 49 and figures["mistral-small-3.1-24b"] == 46 * 36
    assert figures["llama-3.2-11b-vision"] == 1


def test_an_unknown_family_gets_the_default_and_says_so():
    spec = ModelSpec(name="my-model-7b", path="/models/my-model-7b-instruct")
    tokens, source = image_tokens(spec)
    assert tokens == DEFAULT_IMAGE_TOKENS and "unknown model family" in source and "my-model-7b" in source
    assert image_tokens(spec, default=640) == (640, source.replace(str(DEFAULT_IMAGE_TOKENS), "640"))


def test_a_local_folder_is_known_by_its_model_type(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "gemma3"}')
    assert family(ModelSpec(name="local", path=str(tmp_path))) == "gemma-3"


def test_the_module_stays_light():
    """The cost plan runs on a login node: no engine, no transformers, no SLURM module."""
    code = ("import sys, gamut_local.cluster.image_tokens; "
            "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'gamut_local.cluster.slurm', "
            "'gamut_local.cluster.cost') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
