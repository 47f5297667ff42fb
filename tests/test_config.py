"""Run configs: named model/judge configs resolve, paths expand, errors name file and field,
and the domain rules a RunSpec / ModelSpec owns (variants, GPUs, picking, its source file)."""

from __future__ import annotations

import pytest

from gamut_local.config import PROJECT_ROOT, EngineArgs, JudgeSpec, ModelSpec, RunSpec, load_run_config
from gamut_local.errors import InputError

REPO = PROJECT_ROOT


def test_config_errors_name_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndataset: d.jsonl\noutput_dir: out\njudges: [no-such-judge]\nvariants: [colour]\n")
    with pytest.raises(InputError) as e:
        load_run_config(bad)
    assert f"{bad}: judges.0: no judges config named 'no-such-judge'" in str(e.value)
    bad.write_text("name: x\ndataset: d.jsonl\noutput_dir: out\njudges: [{name: j, path: /m}]\nvariants: [colour]\n")
    with pytest.raises(InputError, match=r"bad.yaml: variants.0: Input should be 'multimodal' or 'text_only'"):
        load_run_config(bad)
    bad.write_text("name: x\ndataset: ${NO_SUCH_VAR_FOR_TEST}/d.jsonl\noutput_dir: o\njudges: [{name: j, path: /m}]\n")
    with pytest.raises(InputError, match="dataset: environment variable NO_SUCH_VAR_FOR_TEST is not set"):
        load_run_config(bad)
    bad.write_text("name: x\ndataset: d\noutput_dir: o\njudges: [{name: j, path: /m}, {name: j, path: /n}]\n")
    with pytest.raises(InputError, match="judges: 'j' is listed twice"):
        load_run_config(bad)


def test_named_configs_resolve_from_the_project_and_paths_expand(gamut, tmp_path, monkeypatch):
    monkeypatch.setenv("GAMUT_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.setenv("GAMUT_RUNS", str(tmp_path / "runs"))
    spec = load_run_config(REPO / "configs" / "runs" / "sample.yaml")
    assert spec.models[0].path == str(tmp_path / "models" / "smollm2-135m-instruct")
    assert spec.output_dir == str(tmp_path / "runs" / "sample")
    assert spec.models[0].config_file == str(REPO / "configs" / "models" / "smollm2-135m.yaml")
    # The weights are not there: the CLI names the config file and the folder, exit 1.
    result = gamut("run", "--config", REPO / "configs" / "runs" / "sample.yaml")
    assert result.exit_code == 1
    assert (f"configs/models/smollm2-135m.yaml: path: model folder not found: "
            f"{tmp_path / 'models' / 'smollm2-135m-instruct'}") in result.output
    assert "Traceback" not in result.output and not (tmp_path / "runs").exists()
    gpu = load_run_config(REPO / "configs" / "runs" / "sample-gpu.yaml")
    assert gpu.models[0].path == "Qwen/Qwen3-VL-4B-Instruct" and gpu.variants == ["multimodal", "text_only"]


def _run(**over) -> RunSpec:
    judge = JudgeSpec(name="j", path="/m")
    return RunSpec.model_validate({"name": "r", "dataset": "d.jsonl", "output_dir": "o",
                                   "judges": [judge], **over})


def test_a_model_without_vision_answers_only_text_only():
    blind = ModelSpec(name="b", path="/m", vision=False)
    seeing = ModelSpec(name="s", path="/m")
    both = ["multimodal", "text_only"]
    assert blind.variants(both) == ["text_only"] and seeing.variants(both) == both
    assert blind.variants(["multimodal"]) == []


def test_gpus_default_to_tensor_times_pipeline_parallel_size():
    assert ModelSpec(name="m", path="/m").total_gpus() == 1
    tp4 = ModelSpec(name="m", path="/m", engine=EngineArgs(tensor_parallel_size=4,
                                                          extra={"pipeline_parallel_size": 2}))
    assert tp4.total_gpus() == 8
    assert ModelSpec(name="m", path="/m", gpus=16, engine=EngineArgs(tensor_parallel_size=4)).total_gpus() == 16


def test_pick_and_select_variants_name_the_run_file(tmp_path):
    spec = _run(models=[ModelSpec(name="a", path="/m"), ModelSpec(name="b", path="/m")])
    assert [m.name for m in spec.pick("models", None)] == ["a", "b"]
    assert [m.name for m in spec.pick("models", "b")] == ["b"]
    with pytest.raises(InputError, match=r"<run config>: models: no model named 'c' in this run \(known: a, b\)"):
        spec.pick("models", "c")
    assert spec.select_variants(None) == ["multimodal"]
    with pytest.raises(InputError, match="--variant: <record>: expected one of multimodal, text_only"):
        spec.select_variants("colour")
    with pytest.raises(InputError, match="variants: this run does not include the 'text_only' variant"):
        spec.select_variants("text_only")


def test_a_loaded_run_knows_its_file_and_each_model_its_own(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text("name: x\ndataset: d.jsonl\noutput_dir: out\njudges: [{name: j, path: /m}]\n")
    spec = load_run_config(run)
    assert spec.source == str(run) and spec.judges[0].source == str(run)
    assert spec.output_dir == str(tmp_path / "out") and spec.dataset == str(tmp_path / "d.jsonl")


def _fake_model_folder(folder, config: dict, name: str = "config.json"):
    import json

    folder.mkdir(parents=True)
    (folder / name).write_text(json.dumps(config))
    (folder / "tokenizer_config.json").write_text('{"chat_template": "{{ messages }}"}')
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    return folder


def test_settings_hash_follows_the_weights_not_their_location(tmp_path):
    import shutil

    here = _fake_model_folder(tmp_path / "a" / "model", {"model_type": "llama"})
    spec = ModelSpec(name="m", path=str(here), engine=EngineArgs(extra={"quantization": "fp8"}))
    moved = tmp_path / "b" / "elsewhere"
    shutil.copytree(here, moved)
    assert spec.model_copy(update={"path": str(moved)}).settings_hash() == spec.settings_hash()
    # What changes outputs changes the hash: engine.extra, the chat template, the weights.
    other_extra = spec.model_copy(update={"engine": EngineArgs(extra={"quantization": "awq"})})
    assert other_extra.settings_hash() != spec.settings_hash()
    (moved / "tokenizer_config.json").write_text('{"chat_template": "{{ other }}"}')
    from gamut_local.config import weights_identity

    weights_identity.cache_clear()
    assert spec.model_copy(update={"path": str(moved)}).settings_hash() != spec.settings_hash()
    before = spec.settings_hash()
    (here / "model.safetensors").write_bytes(b"\0" * 65)
    weights_identity.cache_clear()
    assert spec.settings_hash() != before


def test_a_mistral_format_folder_is_a_model_folder(tmp_path):
    from gamut_local.config import resolve_model_path

    folder = _fake_model_folder(tmp_path / "pixtral", {"dim": 5120, "vision_encoder": {"image_size": 1024}},
                                name="params.json")
    assert resolve_model_path(ModelSpec(name="p", path=str(folder))) == (str(folder), None)
    (tmp_path / "empty").mkdir()
    _, problem = resolve_model_path(ModelSpec(name="p", path=str(tmp_path / "empty")))
    assert "no config.json, nor a Mistral-format params.json" in problem.message
