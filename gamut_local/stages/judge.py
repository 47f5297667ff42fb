"""The judge stage: one verdict per (response, check), in large prefix-cached engine passes.

Requests are ordered response by response, each response's checks adjacent, and every
prompt of a response is byte-identical up to the check (see `prompts.judge_conversations`),
so the engine prefills instructions + question + response once per response. Each judge
loads once; pending requests go through `classify` in chunks of about `chunk_size` (cut at
response boundaries), and each chunk is written as one immutable part of the verdict store
(`rundir.verdict_store`) unit `verdicts/<judge>/<model>.<variant>[.shard-i-of-n].parquet`;
when the task ends its parts are compacted into that one file.

Output that cannot be read (no label) is re-asked once by the engine with its other readout
method (`classify`), then recorded as `invalid` with its raw output, never dropped.

Answers judged: the run's generated answers plus its `extra_answers` files (e.g. reference
answers). Every verdict carries its identity (`rundir.identity`): `settings_hash` (the judge as
configured and as resolved at run time), `check_hash` (the check as judged) and `answer_hash`
(the graded response). A rerun re-grades exactly the verdicts whose identity is no longer
current (a reworded check, a regenerated answer, another back end), after moving the stale
ones to `superseded/`, and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from gamut_local.config import JudgeSpec, RunSpec
from gamut_local.data.dataset import load_questions
from gamut_local.data.records import Question, answer_key, load_answers, load_image, verdict_key
from gamut_local.data.verdict_io import adopt_jsonl
from gamut_local.engines import (
    failed_requests,
    judge_identity,
    load_and_close,
    model_problem,
    naming_the_log,
    route_engine_logs,
    start_up,
)
from gamut_local.errors import InputError, Problem
from gamut_local.prompts.judge import judge_conversations
from gamut_local.reporting.progress import plain_console, progress_bars
from gamut_local.rubric.compiler import checks_for
from gamut_local.rubric.schema import Check
from gamut_local.rundir.layout import (
    Shard,
    answer_files,
    answers_path,
    check_chunk_size,
    check_name,
    store_path,
    superseded_path,
    verdict_siblings,
    verdicts_path,
)
from gamut_local.rundir.identity import answer_hash, check_hash, judge_settings_hash
from gamut_local.rundir.paths import run_dir_problems
from gamut_local.rundir.resume import retire_stale, scan_done, stale_summary
from gamut_local.rundir.verdict_store import compact, write_part, writing
from gamut_local.vocab import JUDGE_LABELS, VARIANTS


@dataclass
class ResponseChecks:
    """One response with the checks still to grade on it (adjacent in the batch)."""

    answer: dict
    question: Question
    checks: list[Check]


def build_requests(item: ResponseChecks, image, system_prompt: str | None) -> list[list[dict]]:
    """The judge requests of one response: what the candidate was asked, shown the same way."""
    a = item.answer
    return judge_conversations(item.question.text_for(a["variant"])[0], a["response"],
                               [c.text for c in item.checks], image, system_prompt)


def extra_answer_problems(spec: RunSpec, answers: list[dict], questions, *, extra_only: bool = False) -> list[Problem]:
    """What is wrong with the answers judged beside the generated ones: a model name a
    generated model also uses, or a question the dataset lacks. `run` calls this (with
    `extra_only`: `answers` are the extra answers alone) before the candidate loads, so a
    stray answers file costs a second, not a generation pass."""
    generated = {(m.name, v) for m in spec.models for v in m.variants(spec.variants)}
    problems = []
    extra_models = {a["model"] for a in answers if extra_only or (a["model"], a["variant"]) not in generated}
    clash = extra_models & {m.name for m in spec.models}
    for name in sorted(clash):
        problems.append(Problem(spec.source, None, "extra_answers",
                                f"model name {name!r} is used by both a generated model and an extra answers file"))
    unknown = sorted({a["question_id"] for a in answers if a["question_id"] not in questions})
    if unknown:
        problems.append(Problem(spec.source, None, "extra_answers",
                                f"{len(unknown)} answers are to questions not in the dataset "
                                f"(e.g. {', '.join(unknown[:3])})"))
    return problems


def answers_to_judge(spec: RunSpec, questions: dict[str, Question], shard: Shard, *,
                     model: str | None, variant: str | None) -> list[dict]:
    """Every answer to judge in this shard, validated; missing generated answers are an error."""
    out_dir = Path(spec.output_dir)
    if variant is not None and variant not in VARIANTS:
        raise InputError([Problem("--variant", None, "", f"expected one of {', '.join(VARIANTS)}, got {variant!r}")])
    generated = {(m.name, v) for m in spec.models for v in m.variants(spec.variants)}
    paths = [p for (m, v) in sorted(generated) for p in answer_files(out_dir, m, v)]
    answers = load_answers(paths + list(spec.extra_answers))
    problems = extra_answer_problems(spec, answers, questions)
    extra_models = {a["model"] for a in answers if (a["model"], a["variant"]) not in generated}
    known_models = {m.name for m in spec.models} | extra_models
    if model is not None and model not in known_models:
        problems.append(Problem(spec.source, None, "models",
                                f"no answers of a model named {model!r} (known: {', '.join(sorted(known_models))})"))
    in_shard = shard.select(list(questions))
    mine = []
    have = {answer_key(a) for a in answers}
    for m, v in sorted(generated):
        if (model and m != model) or (variant and v != variant):
            continue
        lacking = sorted(q for q in in_shard if (q, m, v) not in have)
        if lacking:
            problems.append(Problem(str(answers_path(out_dir, m, v)), None, "",
                                    f"{len(lacking)} answers missing for this shard (e.g. {', '.join(lacking[:3])}); "
                                    f"run generate first"))
    if problems:
        raise InputError(problems)
    for a in answers:
        if a["question_id"] in in_shard and (model is None or a["model"] == model) \
                and (variant is None or a["variant"] == variant):
            mine.append(a)
    # Question by question: every system's answers to one question (in one variant) share the
    # instructions, the question and the image as their prompt prefix, computed once.
    return sorted(mine, key=lambda a: (a["question_id"], a["variant"], a["model"]))


def verdict_record(item: ResponseChecks, check: Check, spec: JudgeSpec, settings_hash: str, cls, attempts: int) -> dict:
    a = item.answer
    verdict = cls.label if cls.label is not None else "invalid"
    return {
        "question_id": a["question_id"],
        "model": a["model"],
        "variant": a["variant"],
        "judge": spec.name,
        "check_id": check.check_id,
        "tier": check.tier,
        "verdict": verdict,
        "raw": cls.raw,
        "probs": dict(cls.probs) if cls.probs else None,
        "method": cls.method,
        "prompt_tokens": cls.prompt_tokens,
        "num_cached_tokens": cls.num_cached_tokens,
        "attempts": attempts,
        "settings_hash": settings_hash,
        "check_hash": check_hash(check.text, check.tier, check.kind),
        "answer_hash": answer_hash(a["response"]),
    }


def chunk_items(items: list[ResponseChecks], size: int):
    """Groups of items with about `size` checks; a response's checks never straddle chunks."""
    chunk, n = [], 0
    for it in items:
        if chunk and n + len(it.checks) > size:
            yield chunk
            chunk, n = [], 0
        chunk.append(it)
        n += len(it.checks)
    if chunk:
        yield chunk


def resolved_settings_hash(spec: JudgeSpec, startup=None) -> str:
    """The settings hash this judge's verdicts carry in this environment (config + the set-up
    the engine resolves: `engines.judge_identity`; a served judge's from `startup`, what its
    server said, asked here if None)."""
    return judge_settings_hash(spec, judge_identity(spec, startup))


@dataclass(frozen=True)
class JudgeSetup:
    """A judge as the stage resolves it, once: what its server said at start-up (a served
    judge's; None for one loaded here) and the settings hash its verdicts carry; or, for a
    served judge whose server cannot answer yet, why (said once every other judge had its
    turn; the rerun asks the server again)."""

    settings_hash: str | None = None
    startup: object = None
    problem: InputError | None = None


def judge_setup(spec: JudgeSpec) -> JudgeSetup:
    """Resolve a judge once: a served judge's server is asked what it is here, and only here."""
    try:
        startup = start_up(spec)
        return JudgeSetup(resolved_settings_hash(spec, startup), startup)
    except InputError as err:
        if spec.backend != "openai":
            raise
        return JudgeSetup(problem=err)


def judge_setups(judges: list[JudgeSpec], known: dict[str, JudgeSetup] | None = None
                 ) -> dict[str, JudgeSetup]:
    """Each judge's `JudgeSetup`: the one this process resolved already (`known`: `run`'s, for
    its manifest), so a server is asked once per stage run; resolved now where none is known,
    or where its server could not answer then (it may have started since)."""
    known = known or {}
    return {j.name: known[j.name] if j.name in known and known[j.name].problem is None else judge_setup(j)
            for j in judges}


def pending_verdicts(spec: JudgeSpec, answers: list[dict], questions: dict[str, Question],
                     checks: dict[str, list[Check]], out_dir: Path, shard: Shard = Shard(), *,
                     settings_hash: str | None = None, console: Console | None = None
                     ) -> tuple[list[ResponseChecks], int]:
    """Pending items (response + its checks without a current verdict) and how many verdicts
    are current already. Stale verdicts of this task's responses are moved to `superseded/`
    first (a check that no longer exists: moved, not re-graded)."""
    settings_hash = settings_hash or resolved_settings_hash(spec)
    hashes = {answer_key(a): answer_hash(a["response"]) for a in answers}
    graded = {(a["question_id"], a["variant"]): {c.check_id: check_hash(c.text, c.tier, c.kind) for c in
                                                  questions[a["question_id"]].checks_for_variant(
                                                      a["variant"], checks[a["question_id"]])}
              for a in answers}

    def current(rec: dict) -> dict:
        if answer_key(rec) not in hashes:  # another task's response: not ours to judge or move
            return {}
        return {"settings_hash": settings_hash, "answer_hash": hashes[answer_key(rec)],
                "check_hash": graded[rec["question_id"], rec["variant"]].get(rec["check_id"], "no such check")}

    done: set[tuple] = set()
    for m, v in sorted({(a["model"], a["variant"]) for a in answers}):
        own = store_path(out_dir, spec.name, m, v, shard)
        old = verdicts_path(out_dir, spec.name, m, v, shard)
        if old.exists():  # a run judged before the store: its verdicts move in, once
            n = adopt_jsonl(old, own)
            if console is not None:
                console.print(f"{spec.name} on {m}.{v}: {n} verdicts of {old} converted to the verdict store "
                              f"{own.name} (the JSONL kept as {old.name}.imported)")
        keys, stale = scan_done(sorted(set(verdict_siblings(out_dir, spec.name, m, v)) | {own}),
                                verdict_key, current, "verdict", own=own)
        if stale and console is not None:
            console.print(f"{spec.name} on {m}.{v}: {stale_summary(stale)} verdicts are stale "
                          f"(made for another check, answer or judge set-up); moved to "
                          f"{superseded_path(out_dir, own)} and re-graded", style="yellow")
        retire_stale(stale, own, superseded_path(out_dir, own), "verdict")
        done |= keys
    items, n_done = [], 0
    for a in answers:
        todo = []
        # A text-only answer is graded on the text-only split's own checks where they differ.
        for c in questions[a["question_id"]].checks_for_variant(a["variant"], checks[a["question_id"]]):
            if (a["question_id"], a["model"], a["variant"], spec.name, c.check_id) in done:
                n_done += 1
            else:
                todo.append(c)
        if todo:
            items.append(ResponseChecks(a, questions[a["question_id"]], todo))
    return items, n_done


@dataclass(frozen=True)
class Judged:
    """One judge's part of a `judge`: the answers it grades, verdicts written now (invalid
    among them) and before, and the file its engine's own output went to (None: no engine
    loaded, or on the console)."""

    judge: str
    answers: int
    written: int
    invalid: int
    already_done: int
    engine_log: str | None = None


@dataclass
class JudgePass:
    """What one judge's pass left: verdicts written, how many of them `invalid` (a reply that
    named no label), and the requests that failed for a transient reason (no verdict kept:
    a rerun asks exactly these)."""

    written: int = 0
    invalid: int = 0
    failed: list = field(default_factory=list)  # engines.RequestFailure, in request order
    stopped: bool = False  # the server went away: the chunks after it were not asked


def chunk_requests(spec: JudgeSpec, chunk: list[ResponseChecks], dataset: Path) -> list[list[dict]]:
    """The conversations of one chunk, each question's image loaded once."""
    images: dict[str, object] = {}
    convs = []
    for it in chunk:
        image = None
        if spec.sees_image and it.question.image:
            qid = it.question.question_id
            if qid not in images:
                images[qid] = load_image(it.question.image, dataset)
            image = images[qid]
        convs += build_requests(it, image, spec.system_prompt)
    return convs


def keep_chunk(spec: JudgeSpec, chunk: list[ResponseChecks], results, h: str, out_dir: Path, shard: Shard,
               done: JudgePass) -> set[Path]:
    """Write a chunk's verdicts (one immutable part per unit: a kill loses only the chunk in
    flight); a request that failed transiently is counted, not written. Returns the units."""
    by_file: dict[tuple, list[dict]] = {}
    pairs = [(it, c) for it in chunk for c in it.checks]
    for (it, c), cls in zip(pairs, results, strict=True):
        if cls.failure is not None:
            done.failed.append(cls.failure)
            done.stopped = done.stopped or cls.failure.gone
            continue
        rec = verdict_record(it, c, spec, h, cls, cls.attempts)
        done.invalid += rec["verdict"] == "invalid"
        by_file.setdefault((rec["model"], rec["variant"]), []).append(rec)
    files = set()
    for (m, v), recs in by_file.items():
        path = store_path(out_dir, spec.name, m, v, shard)
        write_part(path, recs)
        done.written += len(recs)
        files.add(path)
    return files


def judge_with(spec: JudgeSpec, items: list[ResponseChecks], dataset: Path, out_dir: Path, shard: Shard,
               chunk_size: int, progress=None, open_engine=load_and_close, *, setup: JudgeSetup | None = None
               ) -> JudgePass:
    """Load the judge once and grade every pending item. A request that failed transiently
    (a served judge's, after its re-sends) is left for the rerun and the other chunks go on,
    unless the server went away. `setup`: the judge as the stage resolved it (here if None);
    a served judge's engine reads as its settings hash says, on the start-up that hash came from."""
    setup = setup or judge_setup(spec)
    if setup.problem is not None:
        raise setup.problem
    h = setup.settings_hash
    total = sum(len(it.checks) for it in items)
    task = progress.add_task(f"judge {spec.name}", total=total) if progress else None
    done = JudgePass()
    files: set[Path] = set()
    served = {} if setup.startup is None else {"startup": setup.startup}
    with naming_the_log(spec.name), open_engine(spec, **served) as engine:
        for chunk in chunk_items(items, chunk_size):
            convs = chunk_requests(spec, chunk, dataset)
            results = engine.classify(convs, list(JUDGE_LABELS))  # re-asks the unreadable itself
            if len(results) != len(convs):
                raise RuntimeError(f"engine returned {len(results)} results for {len(convs)} requests")
            files |= keep_chunk(spec, chunk, results, h, out_dir, shard, done)
            if progress:
                progress.advance(task, len(convs))
            if done.stopped:
                break
    for path in sorted(files):  # the task is done: its parts become one file
        compact(path)
    return done


def failed_problem(spec: JudgeSpec, done: JudgePass, n_done: int) -> Problem:
    """Why the stage exits 1 after keeping every verdict that came back."""
    what, rerun = failed_requests(done.failed, "verdict", done.stopped)
    return spec.problem("server.base_url", f"{what}; {done.written} verdicts written ({done.invalid} invalid), "
                        f"{n_done} already done; none is kept as invalid; {rerun}")


def judge(spec: RunSpec, *, judge: str | None = None, model: str | None = None,
          variant: str | None = None, shard: Shard = Shard(), chunk_size: int | None = None,
          console: Console | None = None, progress=None,
          open_engine=load_and_close, on_ready=None, verbose: bool = False,
          setups: dict[str, JudgeSetup] | None = None) -> list[Judged]:
    """Grade every answer of the run (or of one judge / model / variant / shard) on its checks.

    `on_ready` is called once everything is checked, before any judge loads or any verdict
    is written (the CLI writes the manifest there), with `judge_hashes`: each judge's settings
    hash (None: a served judge whose server does not answer yet). Each judge's summary names in
    `engine_log` the file its engine's own output went to (engines/logs.py), None when no
    engine loaded or `verbose` kept it on the console. `setups`: the judges as this process
    resolved them already (`run`: for its manifest), by name (`judge_setups`)."""
    console = console or plain_console(stderr=True)
    dataset = Path(spec.dataset)
    check_chunk_size(chunk_size)
    out_dir = Path(spec.output_dir)
    questions = {q.question_id: q for q in load_questions(dataset)}
    judges = spec.pick("judges", judge)
    problems = run_dir_problems(spec.output_dir, {"dataset": [spec.dataset], "extra_answers": spec.extra_answers},
                                spec.source)
    for j in judges:
        check_name(j.name, "judges", j.source)
        problem = model_problem(j)
        if problem:
            problems.append(problem)
    if problems:
        raise InputError(problems)
    answers = answers_to_judge(spec, questions, shard, model=model, variant=variant)
    checks = {qid: checks_for(q, spec.compile.small_pool_max) for qid, q in questions.items()}
    summary, failed = [], []
    # The task's units are this process's until it ends: a second judge of the task (a double
    # submit, a requeued task beside its predecessor) is refused here, before it writes anything.
    units = [store_path(out_dir, j.name, m, v, shard) for j in judges
             for m, v in sorted({(a["model"], a["variant"]) for a in answers})]
    with writing(units, heartbeat=True), progress_bars(console, progress) as bars:
        # Each served judge's server is asked what it is once, here or by `run` before it: the
        # manifest's hash, the stage's and the engine's readout all come from that one start-up.
        setups = judge_setups(judges, setups)
        if on_ready is not None:
            on_ready(judge_hashes={name: s.settings_hash for name, s in setups.items()})
        for j in judges:
            if setups[j.name].problem is not None:  # its server cannot answer yet: the others go on
                failed += setups[j.name].problem.problems
                continue
            items, n_done = pending_verdicts(j, answers, questions, checks, out_dir, shard,
                                             settings_hash=setups[j.name].settings_hash, console=console)
            done, log = JudgePass(), None
            if items:
                log = route_engine_logs(out_dir, f"judge{shard.suffix}", verbose)
                done = judge_with(j, items, dataset, out_dir, shard, chunk_size or spec.chunk_size,
                                  bars, open_engine, setup=setups[j.name])
            else:
                console.print(f"{j.name}: all {n_done} verdicts already on disk; nothing to judge")
            if done.failed:
                failed.append(failed_problem(j, done, n_done))
            summary.append(Judged(judge=j.name, answers=len(answers), written=done.written,
                                  invalid=done.invalid, already_done=n_done,
                                  engine_log=str(log) if log else None))
    if failed:  # every verdict that came back is kept, every judge had its turn: now say what is left
        raise InputError(failed)
    return summary
