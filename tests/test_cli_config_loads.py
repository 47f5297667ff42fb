"""Every command on a run config reads and validates it once, and hands the loaded spec on to
its stage: the run config's YAML is parsed once per command (`config.loading._read_yaml`, the
one reader every config load goes through). The fake engine stands in for the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from gamut_local.config import loading
from gamut_local.engines import logs

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "runs" / "sample.yaml"


@pytest.fixture
def reads(monkeypatch) -> list[Path]:
    """The run config's reads: every parse of the file itself (not the model and judge YAMLs
    it names)."""
    seen: list[Path] = []
    real = loading._read_yaml

    def counted(path: Path):
        if Path(path).resolve() == CONFIG.resolve():
            seen.append(path)
        return real(path)

    monkeypatch.setattr(loading, "_read_yaml", counted)
    return seen


@pytest.fixture
def sample_run(monkeypatch, tmp_path) -> Path:
    from tests.support import fake_engine

    fake_engine.sample_models(monkeypatch, tmp_path)
    fake_engine.install(monkeypatch)
    # Whether this machine's SLURM nodes fit the sample's jobs is not what is under test.
    monkeypatch.setattr("gamut_local.cluster.slurm.cluster_nodes", lambda: None)
    monkeypatch.delenv(logs.VERBOSE_VAR, raising=False)
    yield tmp_path / "runs" / "sample"
    logs._to_console()  # the next test starts with engine output on the console, as a fresh process


def test_each_command_reads_the_run_config_once(gamut, sample_run, reads):
    commands = [["run", "--limit", 1], ["generate", "--limit", 1], ["judge", "--limit", 1], ["score-run", "--allow-incomplete"],
                ["plan"], ["plan", "--json"], ["slurm"], ["status"], ["status", "--json"]]
    for args in commands:
        reads.clear()
        res = gamut(args[0], "--config", CONFIG, *args[1:])
        assert res.exit_code == 0, (args, res.output)
        assert len(reads) == 1, (args, len(reads))
    assert (sample_run / "report.md").is_file()  # `run` ran every stage on the one spec
