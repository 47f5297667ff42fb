"""Hostile cases for served candidates (`backend: openai` models): a request still failing after
its retries must cost only its own answer (never a placeholder answer, never the answers of its
batch that came back), and the rerun asks only what is missing.

Each case runs `gamut-local generate` as a process against the fault server on 127.0.0.1 (no
model loads) and holds the corpus' clean-failure rule: exit 1, no traceback, a message naming
the file and field.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile.test_server_judges import clean_failure, gamut, served
from tests.support.openai_fault_server import FaultServer

N_ANSWERS = 4  # 4 questions, text_only


def config(world, candidate: dict, chunk_size: int = 2) -> Path:
    return world.config(models=[candidate], chunk_size=chunk_size)  # the world's judge: a folder, never loaded


def answers(world) -> list[dict]:
    path = world.run_dir / "answers" / "served.text_only.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def start_up(world, server: FaultServer, cfg: Path) -> dict[str, int]:
    """The requests a clean `generate` sends per path ("chat": before its first answer, its
    start-up's probes), measured on a throwaway copy of the run."""
    scratch = world.root / "scratch"
    scratch.mkdir()
    shutil.copy(world.dataset, scratch / world.dataset.name)
    shutil.copytree(world.root / "models", scratch / "models")
    (scratch / "run.yaml").write_text(cfg.read_text())
    before, chats = dict(server.hits), len(server.requests)
    res = subprocess.run([sys.executable, "-m", "gamut_local.cli", "generate", "--config", "run.yaml"],
                         cwd=scratch, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    shutil.rmtree(scratch)
    hits = {p: n - before.get(p, 0) for p, n in server.hits.items()}
    return {**hits, "chat": len(server.requests) - chats - N_ANSWERS}


def test_a_generate_command_asks_the_server_what_it_is_once(world):
    with FaultServer(tokenize=True) as server:
        hits = start_up(world, server, config(world, served(server)))
        assert hits["/v1/models"] == 1 and hits["/version"] == 1, hits
        # A candidate reads no labels: no probe verdict, and the one /tokenize (and its
        # /detokenize) is the chat template's, which says whether vLLM's sampling fields go.
        assert hits["chat"] == 0 and hits["/tokenize"] == 1 and hits["/detokenize"] == 1, hits


def test_a_candidate_on_a_server_that_cannot_judge_answers(world):
    """A server with neither log-probabilities nor constrained choice (a hosted chat API) was
    refused for a candidate too ("it cannot judge"), which only chats: it answers, and only
    its answers are sent."""
    with FaultServer(choice_support=False) as server:
        res = gamut(world, "generate", "--config", config(world, served(server)))
        assert res.returncode == 0, res.stdout + res.stderr
        assert sorted(a["question_id"] for a in answers(world)) == ["q1", "q2", "q3", "q4"]
        assert len(server.requests) == N_ANSWERS
        assert not any(k in body for body in server.requests
                       for k in ("logprobs", "allowed_token_ids", "structured_outputs", "response_format"))


@pytest.mark.parametrize("fault", [("status", 503), ("status", 429), ("close",), ("slow", 5)])
def test_an_answer_failing_after_retries_costs_only_itself_and_the_rerun_asks_it(world, fault):
    """One request of a batch still failing after its retries stopped the stage and dropped
    every answer of its batch that had come back. Each answer that came back is kept, whole;
    the failed one is not written (no placeholder); the rerun asks only that one."""
    with FaultServer(tokenize=True) as server:
        cfg = config(world, served(server, max_concurrency=1))
        probes = start_up(world, server, cfg)["chat"]
        # The start-up's probes, the first answer; then the second (the middle of the first
        # chunk of two) fails on every attempt; the second chunk is asked as usual.
        server.faults = [("ok",)] * (probes + 1) + [fault] * 3
        res = gamut(world, "generate", "--config", cfg)
        out = clean_failure(res, "run.yaml", "server.base_url", "1 answer request failed after 3 attempts",
                            "'What is the thing called q2?'", "3 answers written", "none is kept as an answer",
                            "rerun to ask only those")
        assert ("HTTP" in out) if fault[0] == "status" else True
        kept = answers(world)
        assert sorted(a["question_id"] for a in kept) == ["q1", "q3", "q4"]
        assert all(a["response"] and a["settings_hash"] and a["prompt_hash"] and a["finish_reason"] == "stop"
                   for a in kept)
        asked = len(server.requests)
        res = gamut(world, "generate", "--config", cfg)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "1 answers written, 3 already done" in res.stdout
        sent = server.requests[asked:]
        assert len(sent) == probes + 1  # the start-up, then the one answer
        assert "q2" in json.dumps(sent[-1]["messages"])
        got = answers(world)
        assert sorted(a["question_id"] for a in got) == ["q1", "q2", "q3", "q4"]
        assert got[:3] == kept  # the kept answers untouched, identity and all


def test_a_server_that_stops_accepting_connections_keeps_what_came_back(world):
    with FaultServer(tokenize=True) as server:
        cfg = config(world, served(server, max_concurrency=1, retries=1))
        probes = start_up(world, server, cfg)["chat"]
        n = len(server.requests)
        server.die_after = n + probes + 1  # the start-up, one answer, then no server
        res = gamut(world, "generate", "--config", cfg)
        clean_failure(res, "server.base_url", "1 answers written", "stopped accepting connections",
                      "rerun to resume")
        assert [a["question_id"] for a in answers(world)] == ["q1"]
