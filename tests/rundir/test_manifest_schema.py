"""manifest.json's model: what build_manifest writes validates, names the run's input files
with their content hashes, and a later version's extra fields are kept."""

import hashlib
from pathlib import Path

from gamut_local.config import load_run_config
from gamut_local.rundir.manifest import build_manifest
from gamut_local.rundir.manifest_schema import Manifest

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
