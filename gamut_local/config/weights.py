"""Where a model's weights are and what identifies them: the local folder (or the Hugging
Face cache entry) a spec's `path` names, the identity of the files in it, and the identity
of a served model's endpoint. The only part of the config package that reads model files;
`ModelSpec.settings_hash` takes the weights' identity from here."""

from __future__ import annotations

import functools
from pathlib import Path
from gamut_local.config.paths import is_hub_id
from gamut_local.errors import Problem
from gamut_local.hashing import file_sha256

# `spec` below is a `models.ModelSpec`, left unannotated: the models call into this module,
# and this one imports nothing from them (not even for types), so the two never form a cycle.


def server_host(base_url: str) -> str:
    """`host[:port]` of an endpoint URL: its identity in settings hashes (not the path or scheme,
    which a proxy may change; never userinfo, which may hold a secret)."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else base_url


# What makes a folder a model folder: a Hugging Face config, or Mistral's own format
# (params.json, no config.json; e.g. mistralai/Pixtral-12B-2409, loaded with tokenizer_mode: mistral).
MODEL_CONFIG_FILES = ("config.json", "params.json")


# Files that fix what a folder's weights do with a prompt: architecture, generation defaults,
# tokenizer, chat templates, image processor. Hashed by content; the weights themselves are
# too large to hash on every start, so they count by file name and size (a hub snapshot
# adds its commit).
IDENTITY_FILES = (*MODEL_CONFIG_FILES, "generation_config.json", "tokenizer_config.json", "tokenizer.json",
                  "chat_template.jinja", "chat_template.json", "preprocessor_config.json",
                  "processor_config.json", "model.safetensors.index.json")


@functools.lru_cache(maxsize=64)
def weights_identity(local: str, hub_id: str | None = None) -> dict:
    """A model folder's identity, independent of where it lies (see IDENTITY_FILES)."""
    folder = Path(local)
    ident: dict = {name: file_sha256(folder / name)
                   for name in IDENTITY_FILES if (folder / name).is_file()}
    ident["weights"] = sorted((f.name, f.stat().st_size) for f in folder.iterdir()
                              if f.suffix in (".safetensors", ".bin", ".pt", ".gguf"))
    if hub_id is not None:  # a hub cache snapshot folder is named by its commit
        ident["hub"] = {"id": hub_id, "revision": folder.name}
    return ident


def resolve_model_path(spec) -> tuple[str | None, Problem | None]:
    """The local folder a model's weights are in, or a Problem naming what is missing.

    Checked before any model loads, so a typo costs a second, not a GPU allocation.
    Hub ids are looked up in the Hugging Face cache only (no network). A served model
    (`backend: openai`) has no local folder.
    """
    if spec.backend == "openai":
        return None, None
    if not is_hub_id(spec.path) or Path(spec.path).is_absolute():
        path = Path(spec.path)
        if not path.is_dir():
            return None, spec.problem("path", f"model folder not found: {path}")
        if not any((path / name).is_file() for name in MODEL_CONFIG_FILES):
            return None, spec.problem("path", f"not a model folder (no config.json, nor a Mistral-format "
                                              f"params.json): {path}")
        return str(path), None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None, spec.problem("path", f"{spec.path!r} looks like a hub id, but huggingface_hub is "
                                          "not installed")
    hits = [try_to_load_from_cache(spec.path, name) for name in MODEL_CONFIG_FILES]
    hit = next((h for h in hits if isinstance(h, str)), None)
    if hit is None:
        from huggingface_hub.constants import HF_HUB_CACHE

        return None, spec.problem("path", f"{spec.path!r} is neither a local folder nor a hub id in the "
                                          f"Hugging Face cache ({HF_HUB_CACHE}); download it where there is "
                                          f"internet (huggingface-cli download {spec.path}) or point path at "
                                          "a local folder")
    return str(Path(hit).parent), None


def weights_key(spec) -> dict:
    """The weights' part of a model's settings hash: the identity of its local folder (not
    where it lies, so a moved checkout or cache still resumes), of the folder a SLURM server
    job serves, or of the endpoint (host and served model name, never the key)."""
    local, _ = resolve_model_path(spec)
    key = weights_identity(local, spec.path if is_hub_id(spec.path) else None) if local else {"path": spec.path}
    if spec.server is not None and spec.server.serve:  # served by the run's own job, on any node:
        serve = spec.server.serve
        served, _ = resolve_model_path(spec.model_copy(update={"path": serve, "backend": "vllm", "server": None}))
        key = {"serve": weights_identity(served, serve if is_hub_id(serve) else None) if served else {"path": serve},
               "model": spec.path}
    elif spec.server is not None:
        key = {"server": server_host(spec.server.base_url), "model": spec.path}
    return key
