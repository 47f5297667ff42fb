"""Inputs for `draft` made from the bundled sample: its questions without their rubrics, and
the evidence snippets those rubrics cite, as an evidence JSONL or a folder of Markdown files
(the walk-through in docs/authoring.md starts from them).

`python -m gamut_local.demo.authoring FOLDER [N] [--folder]`. Plain JSON, no package imports.
"""

from __future__ import annotations

import json
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "questions.jsonl"
QUESTION_FIELDS = ("question_id", "domain", "question", "question_text_only", "image")


def sample_records(n: int | None = None) -> list[dict]:
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:n] if n is not None else rows


def write_authoring_inputs(folder: str | Path, n: int | None = None,
                           as_folder: bool = False) -> tuple[Path, Path]:
    """(questions.jsonl, evidence) for the first `n` sample questions; evidence is
    evidence.jsonl, or with `as_folder` a folder evidence/<question_id>/<snippet id>.md."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = sample_records(n)
    questions = folder / "questions.jsonl"
    questions.write_text("".join(json.dumps({k: r[k] for k in QUESTION_FIELDS if r.get(k) is not None},
                                            ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    snippets = [(r["question_id"], s) for r in rows for s in r["meta_rubric"]["snippets"]]
    if not as_folder:
        evidence = folder / "evidence.jsonl"
        evidence.write_text("".join(json.dumps({"question_id": qid, **s}, ensure_ascii=False) + "\n"
                                    for qid, s in snippets), encoding="utf-8")
        return questions, evidence
    evidence = folder / "evidence"
    for qid, s in snippets:
        path = evidence / qid / f"{s['id']}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {s['title']}\n\n{s['text']}\n", encoding="utf-8")
    return questions, evidence


def main(argv: list[str] | None = None) -> None:
    """`python -m gamut_local.demo.authoring FOLDER [N] [--folder]`: the inputs of docs/authoring.md."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    as_folder = "--folder" in args
    args = [a for a in args if a != "--folder"]
    if not args:
        raise SystemExit("usage: python -m gamut_local.demo.authoring FOLDER [N] [--folder]")
    questions, evidence = write_authoring_inputs(args[0], int(args[1]) if len(args) > 1 else None, as_folder)
    print(f"{questions}\n{evidence}")


if __name__ == "__main__":
    main()
