"""The shared guards on the authoring and viewing commands (draft, audit, lint, export,
import, diff, view): an --out that is an input (class 1), names and config references that
would be paths (class 2), bad numbers and YAML (class 4), broken files as messages (class 6).
Nothing here gets as far as a model: every case fails in its checks. Also: audit's
requests in snippet order."""

from __future__ import annotations

import pytest


@pytest.fixture
def draft_cfg(world):
    path = world.root / "DRAFT.yaml"
    path.write_text("model: {name: cand, path: models/cand}\n")
    return path


@pytest.fixture
def evidence(world):
    return world.write_jsonl(world.root / "evidence.jsonl",
                             [{"question_id": "q1", "id": "s1", "title": "T", "text": "Some text."}])


def test_draft_out_equal_to_its_questions_is_refused(world, expect, draft_cfg, evidence):
    expect(1, "draft", world.dataset, "--evidence", evidence, "--config", draft_cfg, "--out", world.dataset,
           named=["--out", "is also an input"], loads=0)


def test_draft_whose_drafts_log_would_overwrite_the_evidence_is_refused(world, expect, draft_cfg):
    ev = world.write_jsonl(world.root / "new.drafts.jsonl",
                           [{"question_id": "q1", "id": "s1", "title": "T", "text": "x"}])
    expect(1, "draft", world.dataset, "--evidence", ev, "--config", draft_cfg, "--out", world.root / "new.jsonl",
           named=["drafts log", "is also an input"], loads=0)


def test_draft_chunk_size_below_one_is_refused(world, expect, draft_cfg, evidence):
    expect(1, "draft", world.dataset, "--evidence", evidence, "--config", draft_cfg,
           "--out", world.root / "d.jsonl", "--chunk-size", "-1", named=["--chunk-size"], loads=0)


def test_draft_config_reference_that_is_a_path_is_refused(world, expect, evidence):
    cfg = world.root / "DRAFT.yaml"
    cfg.write_text("model: ../../models/x\n")
    expect(1, "draft", world.dataset, "--evidence", evidence, "--config", cfg, "--out", world.root / "d.jsonl",
           named=["DRAFT.yaml", "model", "is not a config name"], loads=0)


def test_draft_config_with_a_repeated_key_is_refused(world, expect, evidence):
    cfg = world.root / "DRAFT.yaml"
    cfg.write_text("model: {name: cand, path: models/cand}\nmax_retries: 1\nmax_retries: 3\n")
    expect(1, "draft", world.dataset, "--evidence", evidence, "--config", cfg, "--out", world.root / "d.jsonl",
           named=["DRAFT.yaml:3", "appears twice"], loads=0)


def test_draft_model_name_that_is_a_path_is_refused(world, expect, evidence):
    cfg = world.root / "DRAFT.yaml"
    cfg.write_text("model: {name: ../x, path: models/cand}\n")
    expect(1, "draft", world.dataset, "--evidence", evidence, "--config", cfg, "--out", world.root / "d.jsonl",
           named=["DRAFT.yaml", "model.name"], loads=0)


def test_audit_out_equal_to_its_dataset_is_refused(world, expect):
    cfg = world.root / "AUDIT.yaml"
    cfg.write_text("model: {name: judge, path: models/judge}\n")
    expect(1, "audit", world.dataset, "--config", cfg, "--out", world.dataset, named=["is also an input"], loads=0)


def test_audit_report_beside_out_that_is_the_config_is_refused(world, expect):
    cfg = world.root / "a.report.md"
    cfg.write_text("model: {name: judge, path: models/judge}\n")
    expect(1, "audit", world.dataset, "--config", cfg, "--out", world.root / "a.jsonl",
           named=["its report", "is also an input"], loads=0)


def test_export_into_a_folder_holding_the_dataset_is_refused(world, expect):
    expect(1, "export", world.dataset, "--out", world.root, named=["--out", "contains the input"])


def test_import_out_equal_to_its_folder_is_refused(world, expect):
    folder = world.root / "edit"
    expect(0, "export", world.dataset, "--out", folder, inputs_change=True)
    expect(1, "import", folder, "--out", folder, named=["--out", "is also an input"])


def test_lint_on_deep_nesting_and_repeated_keys_is_a_message(world, expect):
    world.dataset.write_text(world.dataset.read_text() + "{" * 50000 + "\n")
    expect(1, "lint", world.dataset, named=["data.jsonl:5"])


def test_diff_on_a_file_that_is_not_utf8_is_a_message(world, expect):
    (world.root / "b.jsonl").write_bytes(b"\xff\xfe\n")
    expect(1, "diff", world.dataset, world.root / "b.jsonl", named=["b.jsonl:1", "not valid UTF-8"])


def test_view_refuses_an_annotator_name_that_is_a_path(world, expect):
    pytest.importorskip("uvicorn")
    expect(1, "view", world.root, "--annotator", "../../x", named=["is not an annotator name"])


def test_view_refuses_a_run_directory_that_is_not_there(world, expect):
    pytest.importorskip("uvicorn")
    expect(1, "view", world.root / "nope", named=["nope"])


@pytest.mark.parametrize("name", ["0001-q1.yaml", "new.jsonl", "sub/new.jsonl"])
def test_import_out_inside_its_folder_is_refused(world, expect, exported, name):
    (exported / "sub").mkdir()
    before = {p.name: p.read_bytes() for p in exported.glob("*.yaml")}
    expect(1, "import", exported, "--out", exported / name, named=["--out", "inside the input folder"])
    assert {p.name: p.read_bytes() for p in exported.glob("*.yaml")} == before
    assert not (exported / "new.jsonl").exists() and not (exported / "sub" / "new.jsonl").exists()


def test_import_out_beside_its_folder_is_fine(world, expect, exported):
    expect(0, "import", exported, "--out", world.root / "rev.jsonl", inputs_change=True)
    assert (world.root / "rev.jsonl").read_text().count("\n") == 4


def test_draft_out_inside_its_evidence_folder_is_refused(world, expect):
    cfg = world.root / "DRAFT.yaml"
    cfg.write_text("model: {name: cand, path: models/cand}\n")
    (world.root / "ev" / "q1").mkdir(parents=True)
    (world.root / "ev" / "q1" / "s1.md").write_text("# T\n\nSome text.\n")
    expect(1, "draft", world.dataset, "--evidence", world.root / "ev", "--config", cfg,
           "--out", world.root / "ev" / "d.jsonl", named=["inside the input folder"], loads=0)


def test_audit_requests_keep_snippet_order_without_a_search_per_pair():
    """Snippet-major within a question, in the order the snippets are listed, each snippet's
    items in item order."""
    from gamut_local.data.records import Question
    from gamut_local.stages.audit import audit_requests

    class Spec:
        max_snippet_chars = 100

        class model:
            system_prompt = None

    n = 50
    q = Question.model_validate({"question_id": "q", "domain": "d", "question": "Q?", "meta_rubric": {
        "items": [{"id": f"i{k}", "type": "simple", "tier": "valuable", "fact": f"f{k}",
                   "evidence": [f"s{(k * 7) % n}", f"s{(k * 3 + 1) % n}"]} for k in range(n)],
        "snippets": [{"id": f"s{k}", "title": "T", "text": "x"} for k in reversed(range(n))]}})
    keys = [r["key"] for r in audit_requests([q], Spec)]
    snippet_order = [f"s{k}" for k in reversed(range(n))]
    want = sorted(((sid, item) for item in range(n) for sid in (f"s{(item * 7) % n}", f"s{(item * 3 + 1) % n}")),
                  key=lambda p: snippet_order.index(p[0]))
    assert keys == [("q", f"i{item}", sid) for sid, item in want]
