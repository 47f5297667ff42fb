"""Every shipped model and judge config's engine settings are accepted by vLLM's own argument
classes, so a misspelt key or a bad value fails here rather than after a GPU job has queued.

For each YAML under configs/models and configs/judges, and every model and judge the run
configs under configs/runs name or write inline, this builds what the project hands vLLM:
the `LLM(...)` keywords of `engine_kwargs(..., on_cpu=False)` (the GPU settings) for an offline
model, the `vllm serve` flags of `serve_args` for a served judge. The model folder is a stand-in
holding only a config.json (the family's model_type, and a vision_config for a vision model),
so the multimodal keywords are built as for the real checkpoint; no weights are read.

What is checked, all without a model:
- every keyword is a field of `vllm.engine.arg_utils.EngineArgs` (constructing it refuses any
  other: a misspelt key fails);
- every value parses through vLLM's own command line (`EngineArgs.add_cli_args`, or for a served
  judge the `vllm serve` parser `make_arg_parser` and `validate_parsed_serve_args`): types, the
  allowed choices (`mm_encoder_tp_mode`, `dtype`, `logprobs_mode`, ...), and the JSON of
  mapping-valued arguments, which becomes vLLM's config objects (`StructuredOutputsConfig`);
- the scheduler settings build vLLM's `SchedulerConfig` (bounds, and max_num_batched_tokens >=
  max_num_seqs);
- an offline model has no data_parallel_size > 1, which `LLM(...)` refuses (only `vllm serve`
  runs data-parallel copies).
Not checked: anything that needs the checkpoint or a GPU (that the weights and KV cache fit,
that tensor_parallel_size divides the heads, kernels, quantization): `ModelConfig` and
`create_engine_config` read the model's own config, and the engine's memory profile needs the GPU.
A config whose backend is transformers (Llama 3.2 Vision) never reaches vLLM and is skipped.
Importing vLLM takes seconds and loads no model, so no engine lock is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gamut_local.config import PROJECT_ROOT, JudgeSpec, ModelSpec, load_run_config, load_yaml_text

vllm = pytest.importorskip("vllm")

from vllm.config import SchedulerConfig  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

from gamut_local.engines.vllm_engine import engine_kwargs, serve_args  # noqa: E402

CONFIGS = PROJECT_ROOT / "configs"
# model_type of the stand-in folder: Qwen's decides how pixel caps are passed (pixel_kwargs).
MODEL_TYPES = {"qwen3-vl": "qwen3_vl", "gemma-3": "gemma3", "internvl": "internvl", "mistral": "mistral3"}


class _Refused(Exception):
    """vLLM's command line refused the arguments (it would print usage and exit)."""


class _Parser(FlexibleArgumentParser):
    def error(self, message):
        raise _Refused(message)


def _shipped() -> dict[str, ModelSpec]:
    """Every model and judge config the project ships, by a label naming its file."""
    specs: dict[str, ModelSpec] = {}
    for kind, cls in (("models", ModelSpec), ("judges", JudgeSpec)):
        for path in sorted((CONFIGS / kind).glob("*.yaml")):
            data = {"name": path.stem, **load_yaml_text(path.read_text())}
            specs[f"{kind}/{path.name}"] = cls.model_validate(data)
    for run in sorted((CONFIGS / "runs").glob("*.yaml")):
        spec = load_run_config(run)
        for kind in ("models", "judges"):
            for m in getattr(spec, kind):
                specs.setdefault(m.config_file and f"{kind}/{Path(m.config_file).name}"
                                 or f"runs/{run.name}:{m.name}", m)
    return specs


SHIPPED = _shipped()


def _stand_in(spec: ModelSpec, folder: Path) -> str:
    """A folder with only the config.json the project reads before loading (no weights)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = " ".join((spec.name, spec.path)).lower()
    model_type = next((t for key, t in MODEL_TYPES.items() if key in text), "llama")
    config = {"model_type": model_type}
    if spec.vision:
        config["vision_config"] = {"model_type": "vision"}
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


@pytest.fixture(scope="module")
def parsers() -> dict[str, FlexibleArgumentParser]:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser

    return {"offline": EngineArgs.add_cli_args(_Parser()), "serve": make_arg_parser(_Parser())}


def _flags(kw: dict) -> list[str]:
    """`LLM(...)` keywords as vLLM command line flags (the rules `serve_args` follows)."""
    args = []
    for key, value in kw.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, dict):
            args += [flag, json.dumps(value)]
        elif value is not None:
            args += [flag, str(value)]
    return args


def check_engine_settings(spec: ModelSpec, folder: Path, parsers) -> None:
    """Raise (TypeError, _Refused, ValueError) where vLLM would refuse `spec`'s engine settings."""
    model = _stand_in(spec, folder)
    served = spec.backend == "openai"
    offline = spec.model_copy(update={"backend": "vllm", "server": None}) if served else spec
    kw = engine_kwargs(offline, model, on_cpu=False)
    EngineArgs(**kw)  # an unknown keyword is a TypeError naming it
    if served:
        from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args

        validate_parsed_serve_args(parsers["serve"].parse_args(serve_args(spec, model)))
    else:
        parsers["offline"].parse_args(_flags(kw))
        if int(kw.get("data_parallel_size", 1)) > 1:  # vllm/entrypoints/llm.py:281-294
            raise ValueError("LLM(data_parallel_size > 1) is refused offline; only `vllm serve` runs copies")
    scheduling = {k: kw[k] for k in ("max_num_seqs", "max_num_batched_tokens") if k in kw}
    SchedulerConfig(max_model_len=kw.get("max_model_len", 8192), is_encoder_decoder=False, **scheduling)


def test_the_shipped_configs_are_all_here():
    names = set(SHIPPED)
    assert {"judges/qwen3-vl-235b-a22b-fp8.yaml", "judges/qwen3-vl-235b-a22b-fp8-served.yaml",
            "models/qwen3-vl-235b-a22b.yaml", "models/pixtral-12b.yaml"} <= names


@pytest.mark.parametrize("label", sorted(SHIPPED))
def test_vllm_accepts_the_engine_settings(label, tmp_path, parsers):
    spec = SHIPPED[label]
    if spec.backend == "transformers":
        pytest.skip(f"{label} runs on transformers, never through vLLM")
    check_engine_settings(spec, tmp_path / "model", parsers)


@pytest.mark.parametrize("extra, refusal", [
    ({"max_num_seqz": 512}, "max_num_seqz"),  # a misspelt key
    ({"mm_encoder_tp_mode": "date"}, "invalid choice: 'date'"),  # a value not among vLLM's choices
    ({"max_num_batched_tokens": "many"}, "invalid human_readable_int value: 'many'"),  # a wrong type
    ({"max_num_batched_tokens": 256}, r"must be greater than or equal to max_num_seqs \(512\)"),
    ({"data_parallel_size": 2}, "refused offline"),
])
def test_a_bad_engine_setting_fails(extra, refusal, tmp_path, parsers):
    judge = SHIPPED["judges/qwen3-vl-235b-a22b-fp8.yaml"]
    bad = judge.model_copy(update={"engine": judge.engine.model_copy(
        update={"max_num_seqs": 512, "extra": {**judge.engine.extra, **extra}})})
    with pytest.raises((TypeError, _Refused, ValueError), match=refusal):
        check_engine_settings(bad, tmp_path / "model", parsers)


def test_a_bad_served_setting_fails(tmp_path, parsers):
    served = SHIPPED["judges/qwen3-vl-235b-a22b-fp8-served.yaml"]
    # EngineArgs takes any value; the `vllm serve` parser checks it against vLLM's choices.
    bad = served.model_copy(update={"engine": served.engine.model_copy(
        update={"extra": {**served.engine.extra, "mm_encoder_tp_mode": "date"}})})
    with pytest.raises(_Refused, match="--mm-encoder-tp-mode: invalid choice: 'date'"):
        check_engine_settings(bad, tmp_path / "model", parsers)
