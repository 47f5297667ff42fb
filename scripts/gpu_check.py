"""First contact with a GPU: run the bundled sample end to end and check what came out.

Runs `gamut-local run` (the real CLI, in a subprocess) on the sample with the models of
configs/runs/sample-gpu.yaml (Qwen3-VL-4B answers both variants, Qwen3-VL-8B judges and sees
the image) and their shipped engine settings, read offline from the Hugging Face cache. Then
the judge alone grades the same answers again, once per `--max-num-seqs` value, in the judge
stage's order: checks per second after its load (the load's seconds from its log line) and the
prefix cache's hit rate at each. Writes one JSON object (to `--out`, and to stdout): device,
backend and vLLM build used, label method, answers and verdicts, throughput, prefix-cache
fraction, the judge at each batch size, and every deviation from what a healthy run gives.
Exit status 1 on any deviation.

    bash scripts/gpu_check.sh                      # vLLM, the sample-gpu models (needs a GPU)
    bash scripts/gpu_check.sh --backend transformers   # the same through transformers (no vLLM)
    bash scripts/gpu_check.sh --tiny               # the tiny seeded Qwen3-VL instead: no hub,
                                                   # runs on CPU too (the script's own smoke test)
    bash scripts/gpu_check.sh --backend auto       # `backend: auto`, as a config left at the
                                                   # default: it must pick vLLM here

Stage times include each engine's start-up; they are wall-clock seconds on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from gamut_local.rundir.manifest_schema import read_manifest  # noqa: E402
SAMPLE_RUN = ROOT / "configs" / "runs" / "sample-gpu.yaml"
SAMPLE_QUESTIONS = ROOT / "gamut_local" / "data" / "sample" / "questions.jsonl"
MIN_CACHED_FRACTION = 0.5  # the sample's judge prompts share instructions + answer per response
TINY_ENGINE = {"enforce_eager": True, "max_model_len": 4096, "min_pixels": 4 * 32 * 32,
               "max_pixels": 16 * 32 * 32, "gpu_memory_utilization": 0.3}


def _named(kind: str, name: str) -> dict:
    return yaml.safe_load((ROOT / "configs" / kind / f"{name}.yaml").read_text())


def run_config(work: Path, backend: str, tiny: bool, limit: int | None) -> Path:
    """sample-gpu.yaml with the judge seeing the image and every engine on `backend`
    (or the tiny VLM for both), written into `work` with absolute paths."""
    base = SAMPLE_RUN.parent
    cfg = yaml.safe_load(SAMPLE_RUN.read_text())
    if tiny:
        from gamut_local.demo.tiny_vlm import build_tiny_qwen3_vl

        folder = str(build_tiny_qwen3_vl(work / "tiny-qwen3-vl", seed=0))
        engine = {**TINY_ENGINE, "extra": {"block_size": 32}} if expected(backend) == "vllm" else TINY_ENGINE
        model = {"name": "tiny-vl", "path": folder, "engine": engine, "sampling": {"max_tokens": 16}}
        # A judge reads one label step: it carries no sampling settings (a config error if it did).
        judge = {"name": "tiny-vl-judge", "path": folder, "engine": engine}
    else:
        model = _named("models", cfg["models"][0])
        judge = _named("judges", cfg["judges"][0])
    models = [{**model, "name": model.get("name", cfg["models"][0]), "backend": backend}]
    judges = [{**judge, "name": judge.get("name", cfg["judges"][0]), "backend": backend, "sees_image": True}]
    cfg.update(models=models, judges=judges, output_dir=str(work / "run"),
               dataset=str((base / cfg["dataset"]).resolve()),
               extra_answers=[str((base / p).resolve()) for p in cfg.get("extra_answers", [])],
               extra_verdicts=[str((base / p).resolve()) for p in cfg.get("extra_verdicts", [])])
    path = work / "run.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def device() -> dict:
    import torch

    if torch.cuda.is_available():
        return {"kind": "cuda", "name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(),
                "torch": torch.__version__, "cuda": torch.version.cuda}
    return {"kind": "cpu", "name": None, "count": 0, "torch": torch.__version__, "cuda": None}


def read_jsonl(folder: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(folder.rglob("*.jsonl")) for line in p.read_text().splitlines()
            if line.strip()]


def read_verdicts(folder: Path) -> list[dict]:
    """The judge's verdicts from the run's verdict store (one Parquet file per task)."""
    from gamut_local.rundir import verdict_store

    return [r for unit in verdict_store.units_in(folder) for _, r in verdict_store.records(unit)]


def summarise(work: Path, wall: float, dev: dict) -> dict:
    """What the run directory says: backends, methods, counts, throughput, cache use."""
    out = work / "run"
    manifest = read_manifest(out)
    answers = read_jsonl(out / "answers")
    judge = manifest.config.judges[0]["name"]
    verdicts = read_verdicts(out / "verdicts" / judge)
    seconds = {k: v.seconds for k, v in manifest.stages.items()}
    prompt = sum(v["prompt_tokens"] for v in verdicts)
    cached = [v["num_cached_tokens"] for v in verdicts if v["num_cached_tokens"] is not None]
    gen_tokens = sum(a["completion_tokens"] for a in answers)
    return {
        "device": dev,
        "backend": sorted({m["backend_used"] for m in manifest.models}),
        "engine_build": manifest.engine_build,
        "label_method": sorted({v["method"] for v in verdicts}),
        "answers": {v: sum(a["variant"] == v for a in answers) for v in ("multimodal", "text_only")},
        "answers_cut_at_max_tokens": sum(a["finish_reason"] == "length" for a in answers),
        "verdicts": len(verdicts),
        "verdicts_by_variant": {v: sum(x["variant"] == v for x in verdicts) for v in ("multimodal", "text_only")},
        "invalid_verdicts": sum(v["verdict"] == "invalid" for v in verdicts),
        "seconds": {**seconds, "wall": round(wall, 1)},
        "generate_tokens_per_s_incl_start": round(gen_tokens / seconds["generate"], 1) if seconds.get("generate") else None,
        "verdicts_per_s_incl_start": round(len(verdicts) / seconds["judge"], 1) if seconds.get("judge") else None,
        "judge_prompt_tokens_per_s_incl_start": round(prompt / seconds["judge"], 1) if seconds.get("judge") else None,
        "cached_fraction": round(sum(cached) / prompt, 4) if cached and prompt else None,
    }


LOADED = re.compile(r"^gamut-local: \S+ loaded \(.*\) in ([0-9.]+) s$", re.M)


def judge_throughput(work: Path, cfg_path: Path, max_num_seqs: int, limit: int | None) -> dict:
    """The run's judge alone over the run's answers, with `engine.max_num_seqs` set: checks per
    second once its engine is up (wall time less the load its log line reports), and the
    prefix cache's hit rate, in the judge stage's order."""
    cfg = yaml.safe_load(cfg_path.read_text())
    judge = {**cfg["judges"][0]}
    judge["engine"] = {**judge.get("engine", {}), "max_num_seqs": max_num_seqs}
    out = work / f"judge-max-num-seqs-{max_num_seqs}"
    shutil.copytree(work / "run" / "answers", out / "answers", dirs_exist_ok=True)
    path = work / f"judge-max-num-seqs-{max_num_seqs}.yaml"
    path.write_text(yaml.safe_dump({**cfg, "judges": [judge], "output_dir": str(out)}, sort_keys=False))
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "gamut_local.cli", "judge", "--config", str(path)]
    proc = subprocess.run(cmd + (["--limit", str(limit)] if limit else []), cwd=ROOT,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=sys.stderr, stderr=subprocess.PIPE,
                          text=True, check=False)
    wall = time.perf_counter() - t0
    sys.stderr.write(proc.stderr)
    loaded = LOADED.findall(proc.stderr)
    verdicts = read_verdicts(out / "verdicts" / judge["name"]) if proc.returncode == 0 else []
    prompt = sum(v["prompt_tokens"] for v in verdicts)
    cached = sum(v["num_cached_tokens"] or 0 for v in verdicts)
    busy = wall - float(loaded[0]) if len(loaded) == 1 else None
    return {"max_num_seqs": max_num_seqs, "exit": proc.returncode, "loads": len(loaded),
            "load_s": float(loaded[0]) if loaded else None, "verdicts": len(verdicts),
            "seconds_after_load": round(busy, 2) if busy is not None else None,
            "checks_per_s": round(len(verdicts) / busy, 2) if busy else None,
            "cached_fraction": round(cached / prompt, 4) if prompt else None}


def expected(backend: str) -> str:
    """The back end a healthy machine runs: `auto` must pick vLLM where this check runs (it
    picks transformers only where vLLM, or for a vision model torchvision, is missing)."""
    return "vllm" if backend == "auto" else backend


def deviations(s: dict, backend: str, tiny: bool, n_questions: int, limit_s: float) -> list[str]:
    """Everything that differs from a healthy run of this check."""
    bad = []
    if not tiny and s["device"]["kind"] != "cuda":
        bad.append("no GPU: torch.cuda.is_available() is False")
    if s["backend"] != [expected(backend)]:
        bad.append(f"backend used {s['backend']}, expected [{expected(backend)!r}]"
                   + (" (`backend: auto` did not pick vLLM: is it installed, with torchvision?)"
                      if backend == "auto" else ""))
    backend = expected(backend)
    if backend == "vllm" and s["device"]["kind"] == "cuda" and (s["engine_build"] or {}).get("vllm") != "cuda":
        bad.append(f"vLLM build {s['engine_build']}, expected the CUDA build on a GPU")
    if s["label_method"] != ["first_token"]:
        bad.append(f"label methods {s['label_method']}, expected ['first_token']")
    for variant, n in s["answers"].items():
        if n != n_questions:
            bad.append(f"{n} {variant} answers, expected {n_questions}")
    for variant, n in s["verdicts_by_variant"].items():
        if n == 0:
            bad.append(f"no verdicts on {variant} answers")
    if s["invalid_verdicts"]:
        bad.append(f"{s['invalid_verdicts']} invalid verdicts")
    if backend == "vllm" and (s["cached_fraction"] or 0) < MIN_CACHED_FRACTION:
        bad.append(f"prefix-cache fraction {s['cached_fraction']}, expected >= {MIN_CACHED_FRACTION}")
    for row in s.get("judge_throughput", []):
        at = f"the judge at max_num_seqs {row['max_num_seqs']}"
        if row["exit"] != 0 or row["loads"] != 1:
            bad.append(f"{at}: exit {row['exit']}, {row['loads']} engine loads (expected 0 and 1)")
        elif row["verdicts"] != s["verdicts"]:
            bad.append(f"{at}: {row['verdicts']} verdicts, expected the run's {s['verdicts']}")
    if s["seconds"]["wall"] > limit_s:
        bad.append(f"took {s['seconds']['wall']} s, over the {limit_s:.0f} s budget")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("vllm", "transformers", "auto"), default="vllm")
    ap.add_argument("--tiny", action="store_true", help="the tiny seeded Qwen3-VL for both roles (no hub)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions (pilot)")
    ap.add_argument("--work", type=Path, default=None, help="folder for the run (default: a new temp folder)")
    ap.add_argument("--budget-s", type=float, default=780.0, help="wall-clock budget (a deviation beyond it)")
    ap.add_argument("--max-num-seqs", default="64,512", help=(
        "the judge's engine.max_num_seqs values to time it at, comma-separated (empty: none; "
        "default: the old cap and the shipped judges' value)"))
    ap.add_argument("--out", type=Path, default=None, help="where to write the JSON (default: WORK/gpu_check.json)")
    args = ap.parse_args(argv)
    import tempfile

    work = args.work or Path(tempfile.mkdtemp(prefix="gamut-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    cfg = run_config(work, args.backend, args.tiny, args.limit)
    n_questions = sum(1 for line in SAMPLE_QUESTIONS.read_text().splitlines() if line.strip())
    n_questions = min(n_questions, args.limit or n_questions)
    cmd = [sys.executable, "-m", "gamut_local.cli", "run", "--config", str(cfg)]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    t0 = time.perf_counter()
    # The CLI's own report goes to stderr: stdout carries only the JSON.
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=sys.stderr,
                          check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(json.dumps({"work": str(work), "deviations": [f"`gamut-local run` exited {proc.returncode}"]}))
        return 1
    summary = summarise(work, wall, device())
    summary["judge_throughput"] = [judge_throughput(work, cfg, int(n), args.limit)
                                   for n in args.max_num_seqs.split(",") if n]
    summary["seconds"]["wall"] = round(time.perf_counter() - t0, 1)
    summary["deviations"] = deviations(summary, args.backend, args.tiny, n_questions, args.budget_s)
    summary["work"] = str(work)
    text = json.dumps(summary, indent=2)
    (args.out or work / "gpu_check.json").write_text(text + "\n")
    print(text)
    return 1 if summary["deviations"] else 0


if __name__ == "__main__":
    sys.exit(main())
