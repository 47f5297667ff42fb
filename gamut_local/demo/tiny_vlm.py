"""A tiny, seeded, randomly initialised Qwen3-VL, built on the spot for tests and benchmarks.

No package ships vision-language weights and there is no model hub here, so the multimodal
path is exercised with a model that has Qwen3-VL's real architecture, processor and chat
format but random weights: its output is noise, its plumbing is the real thing. The head
size is 64 in both towers because vLLM's CPU attention rejects smaller ones.
"""

from __future__ import annotations

import json
from pathlib import Path

# Qwen's chat format with its vision markers, as the Qwen3-VL instruct template writes them
# (text and single images; no tools or video, which nothing here uses).
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' or 'image' in part or 'image_url' in part -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
# What the byte-level BPE is trained on: enough English and the judge vocabulary that
# prompts tokenise into a few hundred tokens rather than one per byte.
_CORPUS = [
    "What is shown in this image? Describe the dish, its ingredients and where it comes from.",
    "The answer meets the check. The answer partially meets the check. The check is missing.",
    "meets partially_meets missing contradicts",
    "You are a careful judge. Read the question, the response and the check, then answer "
    "with exactly one verdict.",
    "A photograph of a bridge over a river at sunset, with a city skyline behind it.",
    "The quick brown fox jumps over the lazy dog. 0123456789 ,.;:!?()[]{}'\"-_/",
]


def build_tokenizer(vocab_size: int = 512):
    """A byte-level BPE trained on a fixed corpus, with Qwen's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_qwen3_vl_config(vocab_size: int, token_ids: dict[str, int]):
    from transformers import Qwen3VLConfig

    return Qwen3VLConfig(
        text_config=dict(
            vocab_size=vocab_size, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=64,
            max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=True,
            # mrope sections split head_dim/2 = 32 rotary pairs over (time, height, width)
            rope_parameters={"rope_type": "default", "rope_theta": 5_000_000.0,
                             "mrope_section": [12, 10, 10], "mrope_interleaved": True},
            bos_token_id=None, eos_token_id=token_ids["<|im_end|>"],
            pad_token_id=token_ids["<|endoftext|>"],
        ),
        vision_config=dict(
            depth=2, hidden_size=128, intermediate_size=256, num_heads=2, patch_size=16,
            spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=128,
            num_position_embeddings=256, deepstack_visual_indexes=[1],
        ),
        image_token_id=token_ids["<|image_pad|>"],
        video_token_id=token_ids["<|video_pad|>"],
        vision_start_token_id=token_ids["<|vision_start|>"],
        vision_end_token_id=token_ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )


def build_tiny_qwen3_vl(dest: str | Path, seed: int = 0, *, min_pixels: int = 32 * 32 * 4,
                        max_pixels: int = 32 * 32 * 64) -> Path:
    """Build and save a tiny Qwen3VLForConditionalGeneration + tokenizer + processor at `dest`.

    Same seed, same weights. Pixel caps default to 4..64 visual tokens so an image costs
    little on a CPU. Returns `dest`.
    """
    import torch
    from transformers import Qwen3VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = tiny_qwen3_vl_config(len(tok), ids)
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config).to(torch.bfloat16).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.generation_config.bos_token_id = None
    model.save_pretrained(dest, safe_serialization=True)
    tok.save_pretrained(dest)

    image_processor = Qwen2VLImageProcessorPil(
        patch_size=16, merge_size=2, temporal_patch_size=2,
        size={"shortest_edge": min_pixels, "longest_edge": max_pixels})
    image_processor.save_pretrained(dest)
    # The processor config names the processor class, so AutoProcessor rebuilds a
    # Qwen3VLProcessor from the saved parts. Nothing here feeds video (its processor needs a
    # working torchvision; see scripts/setup_engines.sh for the CPU stack's).
    (dest / "processor_config.json").write_text(json.dumps({"processor_class": "Qwen3VLProcessor"}))
    (dest / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    return dest
