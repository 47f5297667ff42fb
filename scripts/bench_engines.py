"""Engine start-up time and throughput, vLLM and transformers side by side, on one model.

Usage: python scripts/bench_engines.py [--model FOLDER] [--max-tokens 128] [--batches 1 8]
                                       [--backends vllm transformers] [--check-logprobs-mode]
Default model: the cached SmolLM2-135M-Instruct folder (scripts/convert_smollm2.py).
Prints one JSON object: per backend, start-up seconds, generation tokens/s per batch size,
judge-style classify requests/s; and the vLLM / transformers ratios from this same run.

--check-logprobs-mode also starts a second vLLM engine with vLLM's default raw logprobs
and checks that greedy `chat` output is identical: the judge engine is always built with
processed logprobs, and that must not change what candidates generate.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# vLLM logs to stdout by default; keep stdout for the JSON (spawned workers inherit this).
os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")

PROMPTS = [
    "Explain how a bicycle gear system works.",
    "Describe the history of the printing press in a few paragraphs.",
    "What are the main ingredients of a traditional paella, and how is it cooked?",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Compare the climates of Norway and Spain.",
    "How do vaccines train the immune system?",
    "Give step-by-step instructions for planting a tomato seedling.",
    "Why is the sky blue? Explain it to a curious ten-year-old.",
]


def judge_requests(n_responses: int, n_checks: int) -> list[list[dict]]:
    from gamut_local.vocab import JUDGE_LABELS

    convs = []
    for r in range(n_responses):
        response = " ".join(f"Point {i} of answer {r}: the dish uses ingredient {i}." for i in range(25))
        for c in range(n_checks):
            convs.append([
                {"role": "system", "content": f"Answer with one word: {', '.join(JUDGE_LABELS)}."},
                {"role": "user", "content": f"Response:\n{response}\n\nCheck: mentions ingredient {c * 3}.\nVerdict:"},
            ])
    return convs


def bench_backend(backend: str, model: str, batches: list[int], max_tokens: int) -> dict:
    from gamut_local.config import EngineArgs, ModelSpec, Sampling
    from gamut_local.engines import load_engine
    from gamut_local.vocab import JUDGE_LABELS

    args = EngineArgs(enforce_eager=True, max_model_len=4096, max_num_seqs=max(batches),
                      kv_cache_memory_bytes=1 << 30)
    spec = ModelSpec(name="bench", path=model, backend=backend, vision=False, engine=args)
    t0 = time.perf_counter()
    engine = load_engine(spec)
    result: dict = {"startup_s": round(time.perf_counter() - t0, 2), "chat": {}}
    try:
        engine.chat([[{"role": "user", "content": "Hi."}]], Sampling(max_tokens=4))  # warm-up
        for b in batches:
            convs = [[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}] for i in range(b)]
            t = time.perf_counter()
            out = engine.chat(convs, Sampling(max_tokens=max_tokens))
            dt = time.perf_counter() - t
            toks = sum(c.completion_tokens for c in out)
            result["chat"][str(b)] = {"requests": b, "completion_tokens": toks, "seconds": round(dt, 2),
                                      "tokens_per_s": round(toks / dt, 1)}
        convs = judge_requests(4, 8)
        t = time.perf_counter()
        verdicts = engine.classify(convs, JUDGE_LABELS)
        dt = time.perf_counter() - t
        prompt = sum(v.prompt_tokens for v in verdicts)
        cached = sum(v.num_cached_tokens or 0 for v in verdicts)
        result["classify"] = {"requests": len(convs), "method": verdicts[0].method,
                              "seconds": round(dt, 2), "requests_per_s": round(len(convs) / dt, 2),
                              "cached_fraction": round(cached / prompt, 3)}
    finally:
        engine.close()
    return result


def check_logprobs_mode(model: str, max_tokens: int) -> dict:
    """Greedy chat with processed vs raw logprobs mode: the texts must be identical."""
    from vllm import LLM, SamplingParams

    convs = [[{"role": "user", "content": p}] for p in PROMPTS]
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    texts = {}
    for mode in ("processed_logprobs", "raw_logprobs"):
        llm = LLM(model=model, enforce_eager=True, max_model_len=4096, kv_cache_memory_bytes=1 << 30,
                  seed=0, logprobs_mode=mode)
        texts[mode] = [o.outputs[0].text for o in llm.chat(convs, params, use_tqdm=False)]
        llm.llm_engine.engine_core.shutdown()
        del llm
    same = sum(a == b for a, b in zip(texts["processed_logprobs"], texts["raw_logprobs"]))
    return {"requests": len(convs), "identical": same}


def main() -> None:
    from gamut_local.demo.smollm2 import default_smollm2_dir

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(default_smollm2_dir()))
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--backends", nargs="+", default=["vllm", "transformers"])
    ap.add_argument("--check-logprobs-mode", action="store_true")
    a = ap.parse_args()
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count()
    report: dict = {"model": a.model, "max_tokens": a.max_tokens, "cpus": cpus,
                    "machine": platform.machine(), "backends": {}}
    for backend in a.backends:
        report["backends"][backend] = bench_backend(backend, a.model, a.batches, a.max_tokens)
    got = report["backends"]
    if "vllm" in got and "transformers" in got:
        report["ratios_vllm_over_transformers"] = {
            **{f"chat_tokens_per_s_batch_{b}": round(got["vllm"]["chat"][b]["tokens_per_s"]
                                                     / got["transformers"]["chat"][b]["tokens_per_s"], 2)
               for b in got["vllm"]["chat"]},
            "classify_requests_per_s": round(got["vllm"]["classify"]["requests_per_s"]
                                             / got["transformers"]["classify"]["requests_per_s"], 2),
            "startup_s": round(got["vllm"]["startup_s"] / got["transformers"]["startup_s"], 2),
        }
    if a.check_logprobs_mode:
        report["logprobs_mode_chat_check"] = check_logprobs_mode(a.model, a.max_tokens)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
