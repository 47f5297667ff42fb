"""manifest.json's model: what build_manifest writes validates, names the run's input files
with their content hashes, and a later version's extra fields are kept."""

import ast
import hashlib
import json
from pathlib import Path

import pytest

from gamut_local.config import load_run_config
from gamut_local.errors import InputError
from gamut_local.rundir.manifest import build_manifest
from gamut_local.rundir.manifest_schema import Manifest
from gamut_local.vocab import SMALL_POOL_MAX

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "runs" / "sample.yaml"


def test_manifest_is_typed_and_names_its_inputs():
    spec = load_run_config(CONFIG)
    data = build_manifest(spec, CONFIG)
    doc = Manifest.model_validate(data)
    assert doc.schema_version == 1 and doc.kind == "gamut-local manifest"
    roles = {i.role: i for i in doc.inputs}
    assert set(roles) == {"dataset", "extra_answers", "extra_verdicts"}
    dataset = Path(spec.dataset)
    assert roles["dataset"].sha256 == hashlib.sha256(dataset.read_bytes()).hexdigest()
    assert roles["dataset"].bytes == dataset.stat().st_size
    assert Manifest.model_validate({**data, "added_later": 1}).model_dump()["added_later"] == 1


def test_build_manifest_writes_every_field():
    """Reading forgives a hand-made manifest's missing environment fields; writing never omits one."""
    doc = Manifest.model_validate(build_manifest(load_run_config(CONFIG), CONFIG))
    assert doc.model_fields_set == set(Manifest.model_fields)


def test_read_manifest_types_what_readers_take(tmp_path):
    from gamut_local.rundir.manifest_schema import read_manifest

    assert read_manifest(tmp_path) is None
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"config": {"dataset": "d.jsonl", "extra_verdicts": ["g.jsonl"], "judges": [{"name": "j"}]},
         "stages": {"judge": {"seconds": 1.5, "limit": 3, "result": []}}}))
    doc = read_manifest(tmp_path)
    assert (doc.config.dataset, doc.config.extra_verdicts, doc.config.extra_answers) == ("d.jsonl", ["g.jsonl"], [])
    assert doc.config.compile.small_pool_max == SMALL_POOL_MAX and doc.stages["judge"].limit == 3
    assert doc.config.judges == [{"name": "j"}]  # a key readers do not type is kept as written


@pytest.mark.parametrize("text, field", [
    ("{not json", ""),
    ("[1, 2]", ""),
    ('{"config": {"extra_verdicts": "gold.jsonl"}}', "config.extra_verdicts"),
    ('{"config": {"compile": {"small_pool_max": true}}}', "config.compile.small_pool_max"),
    ('{"stages": {"judge": {"limit": "3"}}}', "stages.judge.limit"),
])
def test_a_bad_manifest_is_named_by_file_and_field(tmp_path, text, field):
    from gamut_local.rundir.manifest_schema import read_manifest

    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(InputError) as e:
        read_manifest(tmp_path)
    assert [(p.file, p.field) for p in e.value.problems][:1] == [(str(tmp_path / "manifest.json"), field)]


def test_adding_a_stage_keeps_the_manifest_as_written(tmp_path):
    """`write_manifest(refresh=False)` adds the stage record and nothing else: no defaults for
    the fields a manifest lacks."""
    from gamut_local.rundir.manifest import write_manifest

    spec = load_run_config(CONFIG).model_copy(update={"output_dir": str(tmp_path)})
    written = {"run": "x", "config": {"dataset": "d.jsonl", "later": 1}, "stages": {"generate": {"seconds": 2}}}
    (tmp_path / "manifest.json").write_text(json.dumps(written))
    write_manifest(spec, CONFIG, {"judge": {"seconds": 1.0, "limit": 2}}, refresh=False)
    assert json.loads((tmp_path / "manifest.json").read_text()) == {
        **written, "stages": {"generate": {"seconds": 2}, "judge": {"seconds": 1.0, "limit": 2}}}


def test_only_manifest_schema_parses_manifest_json():
    """One reader of manifest.json: a function elsewhere that names the file and parses JSON
    itself is a second one (read it with `read_manifest`, whose `manifest_path` names it)."""
    package = Path(__file__).resolve().parents[2] / "gamut_local"
    found = []
    for path in sorted(package.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names_file = any(isinstance(n, ast.Constant) and n.value == "manifest.json" for n in ast.walk(fn))
            parses = any(isinstance(n, ast.Attribute) and n.attr in ("load", "loads")
                         and isinstance(n.value, ast.Name) and n.value.id == "json" for n in ast.walk(fn))
            if names_file and parses:
                found.append(f"{path.relative_to(package)}:{fn.name}")
    assert found == []
