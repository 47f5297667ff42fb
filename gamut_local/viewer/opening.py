"""A run directory as the viewer finds it (`run_files`: every reason not to open it, before
anything is read) and opens it in the background (`Opening`), and what the overview shows
meanwhile (`overview_opening`). Light on purpose: `gamut-local view` imports this, starlette
and jinja2 before it serves, and the reading (`viewer.index`: numpy, the dataset, the verdict
store) after, in the background.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from gamut_local.errors import InputError, Problem, pydantic_problems
from gamut_local.rundir.layout import scores_path, verdict_files
from gamut_local.vocab import VERDICTS

def _manifest_config(run_dir: Path):
    """The run config manifest.json records (`rundir.manifest_schema`), empty without one."""
    from gamut_local.rundir.manifest_schema import Manifest, read_manifest  # pydantic: not before serving

    return (read_manifest(run_dir) or Manifest()).config


def _locate(ref, run_dir: Path) -> Path | None:
    for cand in (Path(str(ref)), run_dir / str(ref), Path.cwd() / str(ref)):
        if cand.is_file():
            return cand.resolve()
    return None


def _extra(cfg, key: str, run_dir: Path, notes: list[str]) -> list[Path]:
    out = []
    for ref in getattr(cfg, key):
        path = _locate(ref, run_dir)
        if path is None:
            notes.append(f"manifest.json lists {key} file {ref}, which is not readable from here")
        else:
            out.append(path)
    return out


@dataclass
class RunFiles:
    """What a run directory holds for the viewer, found without reading any of it."""

    run_dir: Path
    dataset: Path
    answers: list[Path]
    verdicts: list[Path]
    small_pool_max: int
    notes: list[str]


def run_files(run_dir: Path, dataset: Path | None = None) -> RunFiles:
    """The run's dataset (given, or the one its manifest names), answer and verdict files:
    every reason not to open the run at all, before anything is read."""
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise InputError([Problem(str(run_dir), None, "", "run directory not found")])
    cfg, notes = _manifest_config(run_dir), []
    if dataset is None:
        dataset = _locate(cfg.dataset, run_dir) if cfg.dataset is not None else None
        if dataset is None:
            raise InputError([Problem(str(run_dir / "manifest.json"), None, "config.dataset",
                                      "no readable dataset named; pass --dataset")])
    answer_files = sorted((run_dir / "answers").glob("*.jsonl")) + _extra(cfg, "extra_answers", run_dir, notes)
    files = verdict_files(run_dir)
    files += [p for p in _extra(cfg, "extra_verdicts", run_dir, notes) if p not in set(files)]
    return RunFiles(run_dir, Path(dataset), answer_files, files, cfg.compile.small_pool_max, notes)


def read_scores(path: Path, run_dir: Path, notes: list[str]) -> dict | None:
    """The run's scores file, for the leaderboard; None and a note where it is absent or is
    not a scores file (the rest of the run is still worth looking at)."""
    from pydantic import ValidationError

    from gamut_local.analysis.outputs import ScoresFile

    name = path.relative_to(run_dir)
    if not path.is_file():
        notes.append(f"no {name}: run `gamut-local score-run` for the leaderboard")
        return None
    try:
        return ScoresFile.model_validate_json(path.read_bytes()).model_dump(mode="json")
    except ValidationError as e:
        problem = pydantic_problems(e, str(name), None)[0]
        why = f"{problem.field or '<file>'}: {problem.message}"
    except (OSError, ValueError) as e:
        why = str(e)
    notes.append(f"{name} is not a scores file ({why}): no leaderboard; `gamut-local score-run` writes it again")
    return None


def leaderboard(scores: dict | None) -> dict[str, list]:
    """Leaderboard per judge: the scores file's numbers and CIs, best first."""
    by_judge: dict[str, list] = {}
    for m in (scores or {}).get("models", []):
        by_judge.setdefault(m["judge"], []).append({
            "model": m["model"], "variant": m["variant"], "gamut_score": m.get("gamut_score"),
            "ci95": m.get("ci95"), "n_responses": m.get("n_responses"),
            "verdict_rates": m.get("verdict_rates") or {},
            # Coverage (docs/outputs.md): an incomplete system's score is over fewer questions.
            "complete": m.get("complete"), "n_questions": m.get("n_questions"),
            "n_complete_responses": m.get("n_complete_responses"),
            "n_missing_verdicts": m.get("n_missing_verdicts")})
    for rows in by_judge.values():
        rows.sort(key=lambda r: (-(r["gamut_score"] if r["gamut_score"] is not None else -1e9), r["model"]))
    return by_judge


def overview_opening(run_dir: Path) -> dict:
    """The overview while the run is being read (`Opening`): the scores file's leaderboard
    and the figures, which need no verdicts; the counts come once it is read."""
    notes: list[str] = []
    scores = read_scores(scores_path(run_dir), run_dir, notes)
    return {"run": run_dir.name, "opening": True, "leaderboard": leaderboard(scores), "labels": list(VERDICTS),
            "coverage_from": (scores or {}).get("coverage_from"),
            "figures": sorted(p.name for p in (run_dir / "figures").glob("*.png")), "notes": notes,
            "human_agreement": None, "corrected": [], "team_agreement": None}


class NotOpen(Exception):
    """A page that needs the run, asked for before it could be given: the run is still being
    read (`retry_s` set), or it was read and refused. The app answers 503 with `message`."""

    def __init__(self, lines: list[str], retry_s: int | None = None):
        super().__init__("; ".join(lines))
        self.lines, self.message, self.retry_s = lines, "; ".join(lines), retry_s


STILL_READING = "still reading the run's verdicts; this page answers once they are read"


class Opening:
    """A run read in a background thread (`read(found)`: `index.read_run`), so that
    `gamut-local view` answers at once: the overview shows the scores file's leaderboard
    meanwhile (`overview_opening`), every other page waits for the index (`result`).
    `Opening.of(index)`: a run already open."""

    def __init__(self, found: RunFiles | None, read=None, on_done=None):
        self.files, self.index, self.error = found, None, None
        self.run_dir = found.run_dir if found is not None else None
        self.done = threading.Event()
        if found is not None:
            threading.Thread(target=self._read, args=(read, on_done), name="open-run", daemon=True).start()

    @classmethod
    def of(cls, index) -> Opening:
        opened = cls(None)
        opened.index, opened.run_dir = index, index.run_dir
        opened.done.set()
        return opened

    def _read(self, read, on_done) -> None:
        try:
            self.index = read(self.files)
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits (`result`, `on_done`)
            self.error = e
        self.done.set()
        if on_done is not None:
            on_done(self)

    def result(self, wait_s: float | None = None):
        """The `index.RunIndex` once read (waits for it, at most `wait_s`: NotOpen after that);
        its problem, if it could not be read: bad input (InputError, a file unreadable) as
        NotOpen with the problems, anything else (a bug) as it was raised."""
        if not self.done.wait(wait_s):
            raise NotOpen([STILL_READING], retry_s=2)
        if isinstance(self.error, (InputError, OSError)):
            what = [str(p) for p in self.error.problems] if isinstance(self.error, InputError) \
                else [f"{self.error.filename or ''}: {self.error.strerror or self.error}"]
            raise NotOpen(["this run cannot be opened:", *what, "the viewer stops (fix the run, then start it again)"])
        if self.error is not None:
            raise self.error
        return self.index
