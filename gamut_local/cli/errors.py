"""Every command's error and signal handling (`user_errors`) and the dataset warnings of the
commands that read one (`reads_dataset`)."""

from __future__ import annotations

import functools

import typer

from gamut_local.cli.console import err
from gamut_local.errors import InputError
from gamut_local.reporting.console import echo

# Set by `gamut-local --debug` (main's callback) before any command runs.
OPTIONS = {"debug": False}


def _os_problem(e: OSError) -> str:
    where = e.filename or "<file system>"
    extra = f" -> {e.filename2}" if getattr(e, "filename2", None) else ""
    return f"{where}{extra}: <file>: {e.strerror or e}"


def _fail(lines: list[str], footer: str, code: int):
    from gamut_local.rundir.store import JOURNAL

    from gamut_local.errors import redact

    echo(err, [redact(line) for line in lines])  # an internal error's text may quote a URL or a key
    err.print(f"{footer}; {JOURNAL.summary()}.", style="red")
    raise typer.Exit(code)


class _Terminated(BaseException):
    """SIGTERM (the scheduler's kill, `timeout`) as an exception, so every write in flight is
    cut back or cleaned up (rundir.store) and the message says what was written."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def _cli_framework_exceptions() -> tuple[type[BaseException], ...]:
    """What typer itself raises to exit, abort or report a usage error: passed through to it.
    Typer up to 0.2x re-exports click's classes; from 0.29 it vendors click and has its own, and
    click may not be installed at all."""
    names = ("Exit", "Abort", "TyperException", "BadParameter")
    found = [getattr(typer, n) for n in names if isinstance(getattr(typer, n, None), type)]
    try:
        import click
    except ImportError:
        return tuple(found)
    return (*found, click.exceptions.Exit, click.exceptions.ClickException, click.exceptions.Abort)


def user_errors(fn):
    """Every command's error handling: bad input (InputError), file-system and resource
    errors are one line per problem and exit 1; Ctrl-C exits 130, SIGTERM 143; an unexpected internal
    error is one line and exit 2 (`--debug` prints the traceback). Each failure says what
    was written before it (rundir.store.JOURNAL) and that nothing else was changed."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from gamut_local.rundir.store import JOURNAL

        JOURNAL.reset()
        import signal
        import threading

        main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
        try:
            return fn(*args, **kwargs)
        except InputError as e:
            _fail([str(p) for p in e.problems], f"{len(e.problems)} problem(s)", 1)
        except KeyboardInterrupt:
            _fail([], "interrupted; rerun the same command to resume", 130)
        except _Terminated:
            _fail([], "terminated (SIGTERM); rerun the same command to resume", 143)
        except OSError as e:
            _fail([_os_problem(e)], "1 problem", 1)
        except RecursionError:
            _fail(["<input>: <record>: nested too deeply to read"], "1 problem", 1)
        except MemoryError:
            _fail(["<input>: <record>: out of memory reading the input"], "1 problem", 1)
        except _cli_framework_exceptions():
            raise
        except Exception as e:  # a bug, not bad input: short message, traceback on request
            if OPTIONS["debug"]:
                import traceback

                err.print(traceback.format_exc())
            hint = "" if OPTIONS["debug"] else " (run `gamut-local --debug ...` to print the full traceback)"
            _fail([f"internal error: {type(e).__name__}: {e}{hint}"], "this is a bug, please report it", 2)
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)
            for note in JOURNAL.notices:
                err.print(f"note: {note}", style="yellow")

    return wrapper


def print_warnings(warnings) -> None:
    from gamut_local.data.dataset import warning_lines

    for line in warning_lines(warnings):
        err.print(f"warning: {line}", style="yellow")
    if warnings:
        err.print(f"{len(warnings)} warning(s) about the dataset: each says what was kept or left out; "
                  "--strict makes them errors.", style="yellow")


def reads_dataset(fn):
    """For commands that read a dataset (they take `strict`): print the dataset's warnings at
    the end, each once however often it was read; with --strict every warning is an error."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from gamut_local.data.dataset import collecting_warnings

        with collecting_warnings(strict=kwargs.get("strict", False)) as warnings:
            try:
                return fn(*args, **kwargs)
            finally:
                print_warnings(warnings)

    return wrapper
