"""Options several commands share, declared once: `def cmd(config: RunConfig, strict: Strict = False)`.
A command whose option means something of its own (lint's --strict, draft's --chunk-size)
declares it there instead."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

STRICT_HELP = ("Treat every warning about the dataset (the GAMUT release tolerates bad parts of rows "
               "and leaves unusable rows out) as an error.")
CORRECT_HELP = ("Also give each model judge's scores corrected by these gold judges' verdicts on a random "
                "sample (PPI++; a name or pattern, e.g. 'human-*'); needs the `correct` extra.")
LIMIT_HELP = ("Pilot: only the first N questions by sorted question_id, to try a config before the "
              "full array; a later run without it resumes from what the pilot wrote.")
ALLOW_INCOMPLETE_HELP = ("Go on when a system lacks verdicts on some expected questions or checks (a failed "
                         "shard, a judge that stopped): it is marked incomplete and systems are compared "
                         "only on the questions all of them have (see docs/outputs.md, coverage).")
VERDICTS_HELP = ("Verdicts: a run's verdict folders (RUN/verdicts/JUDGE), store units (.parquet) or "
                 "JSONL files")

# Where `gamut-local view` listens by default, and so what a sign-in link names unless told.
VIEW_HOST, VIEW_PORT = "127.0.0.1", 8765

# The run config is `--config RUN.yaml` in every command that reads one; a run directory, where
# a command takes one, is its positional argument.
RUN_CONFIG_HELP = "Run YAML (e.g. configs/runs/sample.yaml)."
RunConfig = Annotated[Path, typer.Option("--config", help=RUN_CONFIG_HELP)]

Strict = Annotated[bool, typer.Option("--strict", help=STRICT_HELP)]
Verbose = Annotated[bool, typer.Option("--verbose", help=(
    "Engines print their own output (vLLM's log, its progress bars) on the console instead of "
    "RUN/logs/engine-STAGE.log (draft, audit: logs/ in --out's folder; also: GAMUT_VERBOSE=1)."))]
Limit = Annotated[Optional[int], typer.Option("--limit", help=LIMIT_HELP)]
Shard = Annotated[Optional[str], typer.Option(
    "--shard", help="i/n: only questions whose index in sorted(question_id) % n == i.")]
ChunkSize = Annotated[Optional[int], typer.Option(
    "--chunk-size", help="Requests per engine call and atomic append (default: the config's chunk_size).")]
Model = Annotated[Optional[str], typer.Option("--model", help="Only this model's answers (its name in the config).")]
Variant = Annotated[Optional[str], typer.Option("--variant", help="Only this variant: multimodal or text_only.")]

AllowIncomplete = Annotated[bool, typer.Option("--allow-incomplete", help=ALLOW_INCOMPLETE_HELP)]
CorrectWith = Annotated[Optional[str], typer.Option("--correct-with", help=CORRECT_HELP)]
SampleName = Annotated[Optional[str], typer.Option("--sample", help="Name of the run's calibration sample "
                                                   "(default: the only one in RUN/samples/).")]
Seed = Annotated[int, typer.Option("--seed", help="Bootstrap seed.")]
Answers = Annotated[List[Path], typer.Option("--answers", help=(
    "Answer files the verdicts graded (repeatable): a verdict whose answer_hash differs from "
    "its answer's is stale and left out."))]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of a table.")]
LinkHost = Annotated[str, typer.Option("--host", help="Host of the sign-in link (what `view --team --host` serves).")]
LinkPort = Annotated[int, typer.Option("--port", help="Port of the sign-in link.")]
