"""The generate stage: one response per (question, model, variant), in large engine passes.

Per model, the engine loads once and every pending (question, variant) request goes through
it in chunks of `chunk_size`; each chunk is appended atomically to
`answers/<model>.<variant>[.shard-i-of-n].jsonl`. A rerun skips answers already on disk whose
identity is current (`rundir.identity`: the model's `settings_hash`, and the `prompt_hash` of
template, question text and image), so a killed job resumes where it stopped and an edited
question is answered again (its old answer moved to `superseded/`). A served candidate's
request still failing after its re-sends is no answer (never a placeholder): the chunk's other
answers are written, the other chunks asked (unless the server stopped accepting connections),
and the stage then exits 1 naming how many failed; the rerun asks only those.

Variants: `multimodal` sends the image and the generic question; `text_only` sends
`question_text_only` (which names the subject) and no image, falling back to `question` for
records without one (said on the console and recorded as `question_field`). A model with
`vision: false` only does `text_only`; its multimodal variant is skipped with a message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from gamut_local.config import ModelSpec, RunSpec
from gamut_local.data.dataset import load_questions
from gamut_local.data.records import Question, answer_key, image_sha256, load_image
from gamut_local.engines import failed_requests, load_and_close, model_problem, naming_the_log, route_engine_logs
from gamut_local.errors import InputError, Problem
from gamut_local.prompts.candidate import candidate_conversation
from gamut_local.reporting.progress import plain_console, progress_bars
from gamut_local.rundir.identity import prompt_hash
from gamut_local.rundir.layout import (
    Shard,
    answer_files,
    answers_path,
    check_chunk_size,
    check_name,
    superseded_path,
)
from gamut_local.rundir.paths import run_dir_problems
from gamut_local.rundir.resume import retire_stale, scan_done, stale_summary
from gamut_local.rundir.store import append_jsonl


@dataclass
class Request:
    question: Question
    variant: str
    prompt_hash: str = ""

    def prompt_text(self) -> tuple[str, str]:
        """(the text sent, which field it came from)."""
        return self.question.text_for(self.variant)


def prompt_hashes(questions: list[Question], variants: list[str], dataset: Path) -> dict[tuple, str]:
    """(question, variant) -> the `prompt_hash` an answer to it must carry now."""
    images = {q.question_id: image_sha256(q.image, dataset) for q in questions
              if q.image and "multimodal" in variants}
    return {(q.question_id, v): prompt_hash(q.text_for(v)[0], images.get(q.question_id) if v == "multimodal" else None)
            for q in questions for v in variants}


@dataclass(frozen=True)
class Generated:
    """One model's part of a `generate`: its variants, the answers written now and before, and
    the file its engine's own output went to (None: no engine loaded, or on the console)."""

    model: str
    variants: tuple[str, ...]
    written: int
    already_done: int
    engine_log: str | None = None


@dataclass
class ModelWork:
    spec: ModelSpec
    variants: list[str]
    pending: list[Request] = field(default_factory=list)
    done: int = 0


def pending_answers(spec: RunSpec, questions: list[Question], *, model: str | None, variant: str | None,
                    shard: Shard, console: Console) -> list[ModelWork]:
    """What is left to generate, per model; checks every model path before any loads."""
    variants = spec.select_variants(variant)
    models = spec.pick("models", model)
    problems = run_dir_problems(spec.output_dir, {"dataset": [spec.dataset]}, spec.source)
    for m in models:
        check_name(m.name, "models", m.source)
        problem = model_problem(m)
        if problem:
            problems.append(problem)
    if problems:
        raise InputError(problems)
    in_shard = shard.select([q.question_id for q in questions])
    mine = [q for q in sorted(questions, key=lambda q: q.question_id) if q.question_id in in_shard]
    out_dir = Path(spec.output_dir)
    prompts = prompt_hashes(mine, variants, Path(spec.dataset))
    work, imageless = [], set()
    for m in models:
        vs = m.variants(variants)
        if len(vs) < len(variants):
            console.print(f"{m.name}: vision is false, so the multimodal variant is skipped "
                          f"(text_only only)", style="yellow")
        w = ModelWork(m, vs)
        h = m.settings_hash()
        for v in vs:
            own = answers_path(out_dir, m.name, v, shard)
            done = _current_answers(m.name, v, h, prompts, own, answer_files(out_dir, m.name, v), out_dir, console)
            for q in mine:
                if (q.question_id, m.name, v) in done:
                    w.done += 1
                elif v == "multimodal" and q.image is None:
                    imageless.add(q.question_id)
                else:
                    w.pending.append(Request(q, v, prompts[q.question_id, v]))
        work.append(w)
    if imageless:
        raise InputError([Problem(spec.dataset, None, "image",
                                  f"the multimodal variant needs an image; question {q} has none")
                          for q in sorted(imageless)])
    fallback = sum(1 for q in mine if not q.question_text_only)
    if fallback and "text_only" in variants:
        console.print(f"{fallback} of {len(mine)} questions have no question_text_only: "
                      f"their text_only prompt is the generic `question` (recorded as question_field)", style="yellow")
    return work


def _current_answers(model: str, variant: str, settings_hash: str, prompts: dict, own: Path, files: list[Path],
                     out_dir: Path, console: Console) -> set[tuple]:
    """Keys of this task's answers on disk that are current; stale ones are moved to
    `superseded/` so that they are answered again."""
    def current(rec: dict) -> dict:
        if (rec["question_id"], variant) not in prompts:  # another task's question: not ours to move
            return {}
        return {"settings_hash": settings_hash, "prompt_hash": prompts[rec["question_id"], variant]}

    done, stale = scan_done(sorted(set(files) | {own}), answer_key, current, "answer", own=own)
    if stale:
        console.print(f"{model}.{variant}: {stale_summary(stale)} answers are stale (another question "
                      f"text, image, template or model setting); moved to {superseded_path(out_dir, own)} "
                      f"and answered again", style="yellow")
    retire_stale(stale, own, superseded_path(out_dir, own), "answer")
    return done


def _chunks(items: list, size: int):
    for i in range(0, len(items), size):
        yield items[i:i + size]


def answer_record(req: Request, spec: ModelSpec, settings_hash: str, completion) -> dict:
    return {
        "question_id": req.question.question_id,
        "model": spec.name,
        "variant": req.variant,
        "response": completion.text,
        "finish_reason": completion.finish_reason,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "num_cached_tokens": completion.num_cached_tokens,
        "settings_hash": settings_hash,
        "prompt_hash": req.prompt_hash,
        "question_field": req.prompt_text()[1],
        # A reasoning model's thinking, split off by the engine (engines/reasoning.py): kept,
        # never graded; `response` is the answer alone.
        "reasoning": completion.reasoning,
        "reasoning_tokens": completion.reasoning_tokens,
    }


@dataclass
class AnswerPass:
    """What one model's pass left: answers written, and the requests that failed for a
    transient reason (a served candidate's, after its re-sends: no answer kept, a rerun asks
    exactly these)."""

    written: int = 0
    failed: list = field(default_factory=list)  # engines.RequestFailure, in request order
    stopped: bool = False  # the server went away: the chunks after it were not asked


def keep_answers(chunk: list[Request], completions, spec: ModelSpec, settings_hash: str, out_dir: Path,
                 shard: Shard, done: AnswerPass) -> None:
    """Append a chunk's answers, each variant's file at once; a request that failed
    transiently is counted, never written (an empty answer would be graded as the model's)."""
    by_variant: dict[str, list[dict]] = {}
    for r, c in zip(chunk, completions, strict=True):
        if c.failure is not None:
            done.failed.append(c.failure)
            done.stopped = done.stopped or c.failure.gone
            continue
        by_variant.setdefault(r.variant, []).append(answer_record(r, spec, settings_hash, c))
    for v, recs in by_variant.items():
        done.written += append_jsonl(answers_path(out_dir, spec.name, v, shard), recs)


def generate_model(w: ModelWork, dataset: Path, out_dir: Path, shard: Shard, chunk_size: int,
                   progress=None, open_engine=load_and_close) -> AnswerPass:
    """Load the model once and answer every pending request. A request that failed
    transiently (a served candidate's, after its re-sends) is left for the rerun and the
    other chunks go on, unless the server went away."""
    spec, h = w.spec, w.spec.settings_hash()
    task = progress.add_task(f"generate {spec.name}", total=len(w.pending)) if progress else None
    done = AnswerPass()
    with naming_the_log(spec.name), open_engine(spec) as engine:
        for chunk in _chunks(w.pending, chunk_size):
            convs = []
            for r in chunk:
                # Images load per chunk: at paper scale all of them would not fit in memory.
                image = load_image(r.question.image, dataset) if r.variant == "multimodal" else None
                convs.append(candidate_conversation(r.prompt_text()[0], image, spec.system_prompt))
            completions = engine.chat(convs, spec.sampling)
            if len(completions) != len(chunk):
                raise RuntimeError(f"engine returned {len(completions)} completions for {len(chunk)} requests")
            keep_answers(chunk, completions, spec, h, out_dir, shard, done)
            if progress:
                progress.advance(task, len(chunk))
            if done.stopped:
                break
    return done


def failed_problem(spec: ModelSpec, done: AnswerPass, n_done: int) -> Problem:
    """Why the stage exits 1 after keeping every answer that came back."""
    what, rerun = failed_requests(done.failed, "answer", done.stopped)
    return spec.problem("server.base_url", f"{what}; {done.written} answers written, {n_done} already done; "
                        f"none is kept as an answer; {rerun}")


def generate(spec: RunSpec, *, model: str | None = None, variant: str | None = None,
             shard: Shard = Shard(), chunk_size: int | None = None,
             console: Console | None = None, progress=None, open_engine=load_and_close,
             on_ready=None, verbose: bool = False) -> list[Generated]:
    """Generate every missing answer of the run (or of one model / variant / shard).

    `on_ready` is called once everything is checked, before any model loads or any answer
    is written (the CLI writes the manifest there). Returns what was done per model, with
    `engine_log`: the file its engine's own output went to (engines/logs.py), None when no
    engine loaded or `verbose` kept it on the console.
    """
    console = console or plain_console(stderr=True)
    check_chunk_size(chunk_size)
    dataset = Path(spec.dataset)
    questions = load_questions(dataset)  # validates records and images before any model loads
    work = pending_answers(spec, questions, model=model, variant=variant, shard=shard, console=console)
    if on_ready is not None:
        on_ready()
    summary, failed = [], []
    with progress_bars(console, progress) as bars:
        for w in work:
            done, log = AnswerPass(), None
            if not w.variants:
                console.print(f"{w.spec.name}: no variant of this run it can answer; skipped", style="yellow")
            elif w.pending:
                log = route_engine_logs(spec.output_dir, f"generate{shard.suffix}", verbose)
                done = generate_model(w, dataset, Path(spec.output_dir), shard,
                                      chunk_size or spec.chunk_size, bars, open_engine)
            else:
                console.print(f"{w.spec.name}: all {w.done} answers already on disk; nothing to generate")
            if done.failed:
                failed.append(failed_problem(w.spec, done, w.done))
            summary.append(Generated(model=w.spec.name, variants=tuple(w.variants), written=done.written,
                                     already_done=w.done, engine_log=str(log) if log else None))
    if failed:  # every answer that came back is kept, every model had its turn: now say what is left
        raise InputError(failed)
    return summary
