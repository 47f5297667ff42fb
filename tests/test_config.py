"""Run configs: named model/judge configs resolve, paths expand, errors name file and field,
and the domain rules a RunSpec / ModelSpec owns (variants, GPUs, picking, its source file)."""

from __future__ import annotations

import pytest

from gamut_local.config import PROJECT_ROOT, EngineArgs, JudgeSpec, ModelSpec, RunSpec, load_run_config
from gamut_local.errors import InputError

REPO = PROJECT_ROOT


HEAD = "name: x\ndataset: d.jsonl\noutput_dir: out\n"
JUDGE = "judges: [{name: j, path: /m}]\n"
# The validator's own words, which must never reach the user.
JARGON = ("Extra inputs", "List should", "Input should", "Field required", "String should match", "Value error")

# One case per class of mistake: the run file's text after HEAD, and the lines the error must hold
# ({f} is the file; HEAD is lines 1-3).
CASES = {
    "unknown key close to a known one": (JUDGE + "variant: [text_only]\n",
                                         ["{f}:5: variant: unknown key; did you mean `variants`?"]),
    "unknown key like no known one": (JUDGE + "colour: red\n",
                                      ["{f}:5: colour: unknown key (known keys here: name, dataset, output_dir,"]),
    "a misspelt required key": ("judgs: [{name: j, path: /m}]\n",
                                ["{f}: judges: this required key is missing",
                                 "{f}:4: judgs: unknown key; did you mean `judges`?"]),
    "an empty list": ("judges: []\n", ["{f}:4: judges: needs at least 1 entry, got 0"]),
    "a value not among the allowed": (JUDGE + "variants: [colour]\n",
                                      ["{f}:5: variants.0: must be 'multimodal' or 'text_only', got 'colour'"]),
    "a bound": (JUDGE + "slurm:\n  partition: gpu\n  shards_judge: 0\n",
                ["{f}:7: slurm.shards_judge: must be at least 1, got 0"]),
    "a count per name": (JUDGE + "slurm:\n  partition: gpu\n  shards_judge: {j: banana}\n",
                         ["{f}:7: slurm.shards_judge: j: must be a number of tasks (at least 1), or a mapping "
                          "of names to one, got 'banana'"]),
    "a count neither number nor mapping": (JUDGE + "slurm:\n  partition: gpu\n  shards_generate: [2]\n",
                                           ["{f}:7: slurm.shards_generate: must be a number of tasks (at least 1), "
                                            "or a mapping of names to one, got [2]"]),
    "a form": (JUDGE + "slurm: {time_judge: banana}\n",
               ["{f}:5: slurm.time_judge: must be a SLURM time such as 90 (minutes), 12:00:00"]),
    "a type": (JUDGE + "chunk_size: many\n", ["{f}:5: chunk_size: must be a whole number, got 'many'"]),
    "an unknown key inside an inline judge": ("judges:\n  - name: j\n    path: /m\n    engin: {}\n",
                                              ["{f}:7: judges.0.engin: unknown key; did you mean `engine`?"]),
    "a bad name": ("judges: [{name: 'a b', path: /m}]\n",
                   ["{f}:4: judges.0.name: must be a name of letters, digits and _ . + -"]),
    "an unset variable": (JUDGE.replace("/m", "'${NO_SUCH_VAR_FOR_TEST}/m'"),
                          ["{f}:4: judges.0.path: environment variable NO_SUCH_VAR_FOR_TEST is not set"]),
    "a name given twice": ("judges:\n  - {name: j, path: /m}\n  - {name: j, path: /n}\n",
                           ["{f}:4: judges: 'j' is listed twice"]),
    "no such named config": ("judges: [no-such-judge]\n", ["{f}:4: judges.0: no judges config named 'no-such-judge'"]),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_config_errors_say_file_line_key_and_what_to_do(tmp_path, case):
    text, expected = CASES[case]
    bad = tmp_path / "bad.yaml"
    bad.write_text(HEAD + text)
    with pytest.raises(InputError) as e:
        load_run_config(bad)
    got = str(e.value).splitlines()
    for want in expected:
        assert any(line.startswith(want.format(f=bad)) for line in got), (want, got)
    assert len(got) == len(expected), got
    assert not any(j in str(e.value) for j in JARGON), got


def _project(tmp_path, model: str, judge: str = "path: /j\n"):
    """A project folder with configs/{models,judges,runs}; the run names both configs."""
    for kind, text in (("models", model), ("judges", judge)):
        (tmp_path / "configs" / kind).mkdir(parents=True)
        (tmp_path / "configs" / kind / "mine.yaml").write_text(text)
    (tmp_path / "configs" / "runs").mkdir()
    run = tmp_path / "configs" / "runs" / "r.yaml"
    run.write_text(HEAD + "models: [mine]\njudges: [mine]\n")
    return run


def test_an_error_in_a_named_model_config_points_into_that_file(tmp_path):
    run = _project(tmp_path, "path: /m\nengine:\n  dtyp: bfloat16\nsampling:\n  max_tokens: two\n",
                   judge="name: j\n")
    with pytest.raises(InputError) as e:
        load_run_config(run)
    model, judge = tmp_path / "configs" / "models" / "mine.yaml", tmp_path / "configs" / "judges" / "mine.yaml"
    assert str(e.value).splitlines() == [
        f"{judge}: path: this required key is missing",
        f"{model}:3: engine.dtyp: unknown key; did you mean `dtype`?",
        f"{model}:5: sampling.max_tokens: must be a whole number, got 'two'"]


def test_a_loaded_spec_knows_the_line_of_each_key(tmp_path):
    from gamut_local.config import resolve_model_path

    run = _project(tmp_path, "# my model\nvision: false\npath: /no/such/folder\n")
    spec = load_run_config(run)
    _, problem = resolve_model_path(spec.models[0])
    assert str(problem) == (f"{tmp_path / 'configs' / 'models' / 'mine.yaml'}:3: path: "
                            "model folder not found: /no/such/folder")
    assert spec.line_of("judges") == 5 and spec.judges[0].line_of("path") == 1


def test_an_authoring_config_points_into_its_model_config(tmp_path):
    from gamut_local.config import DraftSpec, load_authoring_config

    run = _project(tmp_path, "path: /m\nsampling: {temprature: 0}\n")
    draft = tmp_path / "draft.yaml"
    draft.write_text("model: mine\nmax_item: 3\n")
    with pytest.raises(InputError) as e:
        load_authoring_config(draft, DraftSpec)
    assert sorted(str(e.value).splitlines()) == [
        f"{run.parent.parent / 'models' / 'mine.yaml'}:2: sampling.temprature: unknown key; did you mean "
        "`temperature`?",
        f"{draft}:2: max_item: unknown key; did you mean `max_items`?"]


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
    assert (f"configs/models/smollm2-135m.yaml:5: path: model folder not found: "
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


def test_gpus_count_every_data_parallel_copy():
    # `vllm serve --data-parallel-size 2 --tensor-parallel-size 4` holds two copies of the
    # model in its one job: 8 GPUs, not the 4 of one copy (the server job asks SLURM for them).
    served = ModelSpec(name="m", path="/m", engine=EngineArgs(tensor_parallel_size=4,
                                                             extra={"data_parallel_size": 2}))
    assert served.total_gpus() == 8
    layered = EngineArgs(tensor_parallel_size=2, extra={"pipeline_parallel_size": 2, "data_parallel_size": 3})
    assert ModelSpec(name="m", path="/m", engine=layered).total_gpus() == 12
    assert ModelSpec(name="m", path="/m", gpus=4, engine=EngineArgs(extra={"data_parallel_size": 2})).total_gpus() == 4
    for bad in (0, "2", True):
        with pytest.raises(ValueError, match="extra.data_parallel_size: expected a whole number >= 1"):
            EngineArgs(extra={"data_parallel_size": bad})


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


def _config_reference():
    import importlib.util

    spec = importlib.util.spec_from_file_location("config_reference", REPO / "scripts" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_config_reference_page_is_up_to_date():
    """docs/config.md is written from the config models; edit a field, rerun the script."""
    page = (REPO / "docs" / "config.md").read_text(encoding="utf-8")
    assert page == _config_reference().render(), "run: python scripts/config_reference.py"


def test_the_config_reference_documents_every_key_of_every_config():
    ref = _config_reference()
    page = ref.render()
    for _, cls, _, _ in ref.SECTIONS:
        for name, field in ref._own_fields(cls).items():
            assert field.description and f"| `{name}` |" in page, (cls.__name__, name)
    assert set(ref._own_fields(JudgeSpec)) == {"sees_image", "sampling"}


def test_judge_keys_a_judge_ignores_are_errors_at_their_lines_with_the_reason(tmp_path):
    """A judge reads its label greedily with a budget the labels fix: `temperature`, `top_p`,
    `max_tokens` and `max_retries` used to be accepted (and hashed) and changed nothing."""
    run = _project(tmp_path, "path: /m\nsampling: {temperature: 0.7}\n",
                   judge="path: /j\nmax_retries: 2\nsampling:\n  max_tokens: 16\n  top_p: 0.9\n"
                         "chat_template_kwargs: {enable_thinking: false}\n")
    with pytest.raises(InputError) as e:
        load_run_config(run)
    judge = tmp_path / "configs" / "judges" / "mine.yaml"
    lines = str(e.value).splitlines()
    assert [line.split(": not used by a judge: ")[0] for line in lines] == [
        f"{judge}:2: max_retries", f"{judge}:4: sampling.max_tokens", f"{judge}:5: sampling.top_p"]
    assert "does not sample" in lines[1] and "other readout method" in lines[0]


def test_a_judge_config_without_sampling_loads_and_its_hash_ignores_sampling(tmp_path):
    run = _project(tmp_path, "path: /m\n", judge="path: /j\nsampling: {}\n"
                                                   "chat_template_kwargs: {enable_thinking: false}\n")
    spec = load_run_config(run)
    judge = spec.judges[0]
    assert judge.chat_template_kwargs == {"enable_thinking": False}
    # The template keywords change what the judge reads, so they change its hash.
    assert judge.settings_hash() != judge.model_copy(update={"chat_template_kwargs": {}}).settings_hash()
    # An unset one keeps the hash of a model config written before the field existed.
    model = spec.models[0]
    assert "chat_template_kwargs" not in model.model_dump(exclude_defaults=True)
    assert model.settings_hash() == model.model_copy(update={"chat_template_kwargs": {}}).settings_hash()


def test_every_shipped_judge_config_loads():
    from gamut_local.config import JudgeSpec, load_yaml_text

    for path in sorted((REPO / "configs" / "judges").glob("*.yaml")):
        JudgeSpec.model_validate({"name": path.stem, **load_yaml_text(path.read_text())})


def test_the_example_model_config_loads_and_sets_what_it_explains(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text(HEAD + "models: [EXAMPLE]\n" + JUDGE)
    spec = load_run_config(run)
    example = spec.models[0]
    assert example.config_file == str(REPO / "configs" / "models" / "EXAMPLE.yaml")
    assert example.name == "my-model-7b" and example.engine.dtype == "bfloat16"
    assert example.sampling.max_tokens == 2048 and example.engine.max_model_len == 16384
    assert "EXAMPLE.yaml" in (REPO / "docs" / "config.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("text, hours", [("90", 1.5), ("90:30", 90.5 / 60), ("12:00:00", 12.0), ("1-00:00:00", 24.0),
                                          ("2-3", 51.0), ("1-2:30", 26.5), ("banana", None), ("1-", None),
                                          ("1:2:3:4", None)])
def test_one_slurm_time_grammar_validates_and_measures(text, hours):
    """What `slurm.time_*` accepts is exactly what `cluster` can turn into hours."""
    from gamut_local.config import slurm_hours

    assert slurm_hours(text) == (pytest.approx(hours) if hours is not None else None)
    assert _slurm_accepts(time_judge=text) == (hours is not None)


def _slurm_accepts(**fields) -> bool:
    from pydantic import ValidationError

    from gamut_local.config import SlurmSpec

    try:
        SlurmSpec(**fields)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("text, mb", [("64G", 65536), ("500M", 500), ("1024", 1024), ("2T", 2 * 1024 * 1024),
                                      ("64GB", None), ("G", None)])
def test_one_slurm_memory_grammar_validates_and_measures(text, mb):
    from gamut_local.config import mem_mb

    assert mem_mb(text) == (mb or 0)
    assert _slurm_accepts(mem_score=text) == (mb is not None)
