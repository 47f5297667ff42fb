"""The `gamut-local` command line: each command is a thin call into one stage.

Heavy modules (engines, stages that load models, plotting) are imported inside the command
that needs them, so `gamut-local score` starts without torch.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from .errors import InputError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="GAMUT factual-completeness benchmark, offline, on open models.")
err = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def user_errors(fn):
    """Print InputError problems one per line and exit 1; never a traceback for bad input."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InputError as e:
            for p in e.problems:
                err.print(str(p), markup=False)
            err.print(f"{len(e.problems)} problem(s); nothing was written.", style="red")
            raise typer.Exit(1)

    return wrapper


@app.command()
@user_errors
def validate(dataset: Path = typer.Argument(..., help="Question JSONL (or GAMUT parquet).")):
    """Check every record of a dataset and what it references; one line per problem."""
    from .data.records import load_questions

    questions = load_questions(dataset)
    out.print(f"{dataset}: {len(questions)} questions, all valid.")


@app.command("compile")
@user_errors
def compile_cmd(
    dataset: Path = typer.Argument(..., help="Question JSONL (or GAMUT parquet)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the rubric JSONL."),
    small_pool_max: int = typer.Option(6, help="Flexible lists with at most this many options get one check per option."),
):
    """Compile every question's meta-rubric into checks (deterministic, no model)."""
    from .data.records import load_questions
    from .rubric.compiler import compile_dataset
    from .store import write_jsonl

    rows = compile_dataset(load_questions(dataset), small_pool_max=small_pool_max)
    write_jsonl(out_path, rows)
    n = sum(len(r["checks"]) for r in rows)
    out.print(f"{out_path}: {n} checks for {len(rows)} questions.")


@app.command()
@user_errors
def score(
    verdicts: List[Path] = typer.Argument(..., help="Verdict JSONL files (judges and models may be mixed)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the scores JSON."),
    dataset: Optional[Path] = typer.Option(None, help="Dataset, for the per-domain breakdown."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
):
    """Turn verdicts into tier scores, response scores and GAMUT scores with 95% CIs."""
    from .score import score_files

    result = score_files(verdicts, dataset=dataset, seed=seed)
    from .store import write_json

    write_json(out_path, result)
    for m in result["models"]:
        out.print(f"{m['judge']:>20}  {m['model']:<28} {m['variant']:<10} "
                  f"GAMUT {m['gamut_score']:6.1f}  [{m['ci95'][0]:.1f}, {m['ci95'][1]:.1f}]")


def main():  # pragma: no cover - console entry for `python -m gamut_local.cli`
    app()


if __name__ == "__main__":
    sys.exit(main())
