"""A run's team accounts as the owner manages them and as a hostile file or caller meets them:
tokens printed once and stored only hashed, a name active once, revocation, two adds at once,
damaged accounts files refused with the file and field named."""

from __future__ import annotations

import hashlib
import json
import threading

import pytest

from gamut_local.errors import InputError
from gamut_local.rundir import annotators


def test_add_prints_a_link_once_and_stores_only_the_hash(tmp_path, gamut):
    res = gamut("annotators", "add", tmp_path, "alice", "--host", "lab-box.example", "--port", "9001")
    assert res.exit_code == 0, res.output
    link = next(x for x in res.output.splitlines() if x.startswith("http://"))
    assert link.startswith("http://lab-box.example:9001/signin?token=")
    token = link.split("token=", 1)[1]
    assert len(token) >= 43  # 32 random bytes, base64url
    text = (tmp_path / "team" / "annotators.json").read_text()
    assert token not in text and hashlib.sha256(token.encode()).hexdigest() in text
    assert annotators.verify(tmp_path, token) == "alice"
    assert annotators.verify(tmp_path, token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    listed = gamut("annotators", "list", tmp_path)
    assert listed.exit_code == 0 and "alice" in listed.output and "active" in listed.output
    assert token not in listed.output and hashlib.sha256(token.encode()).hexdigest() not in listed.output


def test_an_active_name_is_refused_and_a_bad_name_too(tmp_path, gamut):
    assert gamut("annotators", "add", tmp_path, "alice").exit_code == 0
    before = (tmp_path / "team" / "annotators.json").read_bytes()
    res = gamut("annotators", "add", tmp_path, "alice")
    assert res.exit_code == 1 and "already has an active account" in res.output and "Traceback" not in res.output
    res = gamut("annotators", "add", tmp_path, "../Eve")
    assert res.exit_code == 1 and "not an annotator name" in res.output
    assert (tmp_path / "team" / "annotators.json").read_bytes() == before


def test_revoke_refuses_the_old_token_and_a_new_account_gets_a_new_one(tmp_path, gamut):
    old = annotators.add(tmp_path, "bob")
    res = gamut("annotators", "revoke", tmp_path, "bob")
    assert res.exit_code == 0, res.output
    assert annotators.verify(tmp_path, old) is None
    assert "revoked" in gamut("annotators", "list", tmp_path).output
    res = gamut("annotators", "revoke", tmp_path, "bob")
    assert res.exit_code == 1 and "no active account 'bob'" in res.output
    new = annotators.add(tmp_path, "bob")
    assert new != old and annotators.verify(tmp_path, new) == "bob" and annotators.verify(tmp_path, old) is None
    assert [a.active for a in annotators.list_accounts(tmp_path)] == [False, True]


def test_two_adds_at_once_lose_no_account(tmp_path):
    tokens, errors = {}, []

    def add(name):
        try:
            tokens[name] = annotators.add(tmp_path, name)
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=add, args=(f"a{k}",)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(a.name for a in annotators.list_accounts(tmp_path)) == sorted(tokens)
    assert all(annotators.verify(tmp_path, t) == n for n, t in tokens.items())


def test_four_add_commands_at_once_lose_no_account(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    gamut = Path(sys.executable).with_name("gamut-local")
    procs = {n: subprocess.Popen([str(gamut), "annotators", "add", str(tmp_path), n], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for n in ("p0", "p1", "p2", "p3")}
    tokens = {}
    for n, p in procs.items():
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        tokens[n] = out.strip().split("token=")[1]
    assert all(annotators.verify(tmp_path, t) == n for n, t in tokens.items())


def _account(**fields) -> str:
    a = {"name": "al", "token_sha256": "0" * 64, "sessions": [], "created": "t", "revoked": None, **fields}
    return json.dumps({"team_id": "x", "annotators": [{k: v for k, v in a.items() if v != "DROP"}]})


@pytest.mark.parametrize("content, field", [
    ("{not json", ""),
    (_account(name="Alice"), "Alice"),
    (_account(token_sha256="abc"), "token_sha256"),
    (_account(token_sha256=5), "token_sha256"),
    (_account(revoked="DROP"), "annotators[0]"),
    (_account(sessions="DROP"), "annotators[0]"),
    (_account(sessions="0" * 64), "sessions"),
    (_account(sessions=["0" * 63]), "sessions"),
    (_account(sessions=[None]), "sessions"),
    (_account(created=None), "created"),
    ('{"team_id": "x", "annotators": [], "annotators": []}', "twice"),
])
def test_a_damaged_accounts_file_is_refused_naming_it(tmp_path, gamut, content, field):
    path = tmp_path / "team" / "annotators.json"
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(InputError) as e:
        annotators.read_team(tmp_path)
    assert str(path) in str(e.value.problems[0]) and field in str(e.value.problems[0])
    res = gamut("annotators", "add", tmp_path, "carol")
    assert res.exit_code == 1 and "Traceback" not in res.output and path.read_text() == content


def test_verify_refuses_what_is_not_a_token(tmp_path):
    annotators.add(tmp_path, "alice")
    for bad in ("", "x" * 10_000, "\ud800", None, 5):
        assert annotators.verify(tmp_path, bad) is None
    data = json.loads((tmp_path / "team" / "annotators.json").read_text())
    assert annotators.verify(tmp_path, data["annotators"][0]["token_sha256"]) is None  # the hash is no token


def test_an_account_keeps_its_last_sessions_only(tmp_path):
    """Each sign-in adds a session; beyond SESSIONS_KEPT the oldest ends."""
    token = annotators.add(tmp_path, "alice")
    sids = []
    for _ in range(annotators.SESSIONS_KEPT + 1):
        name, sid = annotators.sign_in(tmp_path, token)
        assert name == "alice" and annotators.sign_in(tmp_path, token) is None  # used up
        sids.append(sid)
        token = annotators.link(tmp_path, "alice")
    team = annotators.read_team(tmp_path)
    assert annotators.session_in(team, sids[0]) is None
    assert all(annotators.session_in(team, sid).name == "alice" for sid in sids[1:])
    for bad in ("", "x" * 10_000, None, 5, team.accounts[0].sessions[0]):  # a hash is no session id
        assert annotators.session_in(team, bad) is None
