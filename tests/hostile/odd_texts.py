"""Text that YAML treats specially, and questions made of it: shared by the export/import,
strict-loader and authoring tests."""

from __future__ import annotations

ODD_TEXTS = ["yes", "123", "null", "- x", "# not a comment", "a: b", "trailing ", " leading", "multi\nline",
             "tab\there", "ünï “q” 日本語", "x" * 250, " ".join(["word"] * 60), "'s'", '"d"', "~", "@at", "`t",
             "{b}", "[l]", "0x1F", "1e3", "2020-01-01", "true", "NO", "on", "end\n", "\\b", "%p", "&a", "*a", "!t",
             "|p", ">g", "😀", "\u2028", "bell\x07", "R&D", ""]


def odd_record(k: int) -> dict:
    pick = lambda j: ODD_TEXTS[(k * 7 + j) % len(ODD_TEXTS)] or "x"  # noqa: E731
    items = [{"id": f"a{k}", "type": "simple", "tier": "answer_critical", "fact": pick(0), "subject": pick(1),
              "evidence": ["s1"]},
             {"id": f"b{k}", "type": "strict_list", "tier": "valuable", "elements": [pick(2), pick(3)],
              "meta_insight": pick(4)},
             {"id": f"c{k}", "type": "flexible_list", "tier": "context", "options": [pick(5 + j) for j in range(8)],
              "min_required": 2, "extra_thresholds": [3, 8]},
             {"id": f"d{k}", "type": "process", "tier": "valuable", "check_full_order": True,
              "steps": [{"text": pick(13)}, {"text": pick(14), "required": False}]},
             {"id": f"e{k}", "type": "relationship", "tier": "answer_critical", "entities": [pick(15), pick(16)],
              "aspects": [pick(17)]}]
    return {"question_id": f"q{k}", "domain": pick(18), "question": pick(19), "question_text_only": pick(20),
            "meta_rubric": {"items": items, "snippets": [{"id": "s1", "title": pick(21), "url": None,
                                                          "text": pick(22)}]},
            "provenance": {"revised_on": "2026-01-01", "revised_by": pick(23)}}
