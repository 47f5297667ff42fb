"""How much label probability the case and leading-space spellings recover.

The judge reads each label's probability off the first token of the label. Counting only one
spelling (`meets` or ` meets`) drops whatever the model puts on the others (`Meets`,
` Meets`, `MEETS`, ...); the arg-max rarely moves, but the probabilities behind the
adjudication queue's entropy and the calibration curves do. This runs real judge prompts
(the bundled sample's reference answers against their checks, the real prompt builder)
through the transformers engine on SmolLM2 and on the tiny seeded Qwen3-VL, takes the full
next-token distribution at the label position, and prints JSON per model:

  mass_primary    probability on the one spelling the readout used to count (mean, min, max)
  mass_counted    probability on every counted spelling (what the readout counts now)
  recovered       mass_counted - mass_primary (mean, max)
  tv_distance     total variation between the renormalised label distributions, old vs new
  argmax_changed  requests whose arg-max label differs
  tokens          the token strings counted per label
  peak_rss_mib    the process's peak memory

    .venv/bin/python scripts/bench_label_spellings.py [--requests 200] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SAMPLE = REPO / "gamut_local" / "data" / "sample"


def requests(n: int) -> list[list[dict]]:
    """Up to `n` real judge conversations: reference answers x their checks, text only."""
    from gamut_local.data.dataset import load_questions
    from gamut_local.prompts.judge import judge_conversations
    from gamut_local.rubric.compiler import checks_for

    questions = {q.question_id: q for q in load_questions(SAMPLE / "questions.jsonl")}
    convs = []
    for line in (SAMPLE / "answers" / "reference.jsonl").read_text().splitlines():
        a = json.loads(line)
        q = questions[a["question_id"]]
        convs += judge_conversations(q.text_for("text_only")[0], a["response"],
                                     [c.text for c in checks_for(q)])
    return convs[:n]


def measure(engine, convs: list[list[dict]]) -> dict:
    import torch

    from gamut_local.engines.labels import label_logprobs, normalise
    from gamut_local.vocab import JUDGE_LABELS

    readout = engine.label_readout(JUDGE_LABELS)
    primary = [ids[0] for ids in readout.token_ids]
    rows = []
    for start in range(0, len(convs), 8):
        rendered = [engine._render(c) for c in convs[start:start + 8]]
        enc = engine._tensors([r[0] for r in rendered], [])
        with torch.inference_mode():
            logits = engine.model(**enc, logits_to_keep=1).logits[:, -1, :].float()
        rows += torch.log_softmax(logits, dim=-1).tolist()
    mass_p, mass_c, tv, changed = [], [], [], 0
    for lp in rows:
        counted = {t: lp[t] for t in readout.all_token_ids()}
        old = normalise({lab: lp[t] for lab, t in zip(readout.labels, primary)})
        new = normalise(label_logprobs(readout, counted))
        mass_p.append(sum(2.718281828459045 ** lp[t] for t in primary))
        mass_c.append(sum(2.718281828459045 ** v for v in counted.values()))
        tv.append(0.5 * sum(abs(old[k] - new[k]) for k in readout.labels))
        changed += max(old, key=old.get) != max(new, key=new.get)
    recovered = [c - p for c, p in zip(mass_c, mass_p)]
    return {
        "requests": len(rows), "readout": readout.method, "lead": readout.lead,
        "tokens": {lab: [engine.tokenizer.decode([t]) for t in ids] for lab, ids in zip(readout.labels, readout.token_ids)},
        "mass_primary": {"mean": sum(mass_p) / len(rows), "min": min(mass_p), "max": max(mass_p)},
        "mass_counted": {"mean": sum(mass_c) / len(rows), "min": min(mass_c), "max": max(mass_c)},
        "recovered": {"mean": sum(recovered) / len(rows), "max": max(recovered)},
        "tv_distance": {"mean": sum(tv) / len(rows), "max": max(tv)},
        "argmax_changed": changed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from gamut_local.config import EngineArgs, JudgeSpec
    from gamut_local.engines.transformers_engine import TransformersEngine
    from gamut_local.demo.smollm2 import convert_smollm2
    from gamut_local.demo.tiny_vlm import build_tiny_qwen3_vl

    convs = requests(args.requests)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        models = {"smollm2-135m": str(convert_smollm2(verbose=False)),
                  "tiny-qwen3-vl": str(build_tiny_qwen3_vl(Path(tmp) / "tiny-vl", seed=0))}
        for name, path in models.items():
            spec = JudgeSpec(name=name, path=path, backend="transformers", vision=False,
                             engine=EngineArgs(dtype="float32"))
            engine = TransformersEngine(spec, path)
            out[name] = measure(engine, convs)
            engine.close()
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    text = json.dumps(out, indent=2, ensure_ascii=False)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
