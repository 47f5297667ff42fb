"""Prompt templates: the judge's prefix-cache layout, the candidate's image-first request, and
template hashes that stay put (records and the committed sample manifest carry them)."""

from __future__ import annotations

import json

from PIL import Image

from gamut_local.config import PROJECT_ROOT
from gamut_local.prompts import template_hashes
from gamut_local.prompts.candidate import candidate_conversation
from gamut_local.prompts.judge import JUDGE_INSTRUCTIONS, judge_conversations


def _user_text(conv) -> str:
    content = conv[-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def test_a_responses_judge_prompts_share_every_byte_before_the_check():
    checks = ["The response names the bridge.", "The response gives the year 1937."]
    convs = judge_conversations("When was it built?", "It opened in 1937.", checks)
    texts = [_user_text(c) for c in convs]
    head = texts[0][: texts[0].index(checks[0])]
    assert texts[1].startswith(head) and texts[1][len(head):].startswith(checks[1])
    assert all(t.endswith("Verdict:") for t in texts)
    assert {c[0]["content"] for c in convs} == {JUDGE_INSTRUCTIONS}


def test_with_an_image_the_judge_sees_question_image_then_response_and_check():
    image = Image.new("RGB", (8, 8))
    conv = judge_conversations("What is this?", "A cat.", ["The response names a cat."], image, "Be strict.")[0]
    parts = conv[1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_pil", "text"]
    assert parts[0]["text"].startswith("Question:\nWhat is this?") and parts[1]["image_pil"] is image
    assert parts[2]["text"].rstrip().endswith("Verdict:") and "A cat." in parts[2]["text"]
    assert conv[0]["content"].startswith("Be strict.\n\n") and conv[0]["content"].endswith(JUDGE_INSTRUCTIONS)


def test_candidates_get_the_question_as_asked_image_first():
    assert candidate_conversation("Why?") == [{"role": "user", "content": "Why?"}]
    image = Image.new("RGB", (4, 4))
    conv = candidate_conversation("What is this?", image, "You are helpful.")
    assert conv[0] == {"role": "system", "content": "You are helpful."}
    assert [p["type"] for p in conv[1]["content"]] == ["image_pil", "text"]


def test_template_hashes_match_the_committed_sample_run():
    # A changed template must change its hash (and so the settings hash of every verdict);
    # an unchanged one must keep it, or every earlier run would stop resuming.
    manifest = json.loads((PROJECT_ROOT / "results" / "sample" / "run-manifest.json").read_text())
    hashes = template_hashes()
    for name, recorded in manifest["prompt_templates"].items():
        assert hashes[name] == recorded
