"""Every command that README.md and docs/*.md show is run here, so none can go stale.

Each fenced `bash` block is read as a script: lines joined at a trailing backslash, `# comments`
and a leading `$ ` dropped, `cat > FILE <<'EOF'` heredocs written. The blocks run in order, in
one scratch copy of the project (configs/ and results/ copied, the package linked), README.md
first, then docs/*.md by name, so a page may use what the README's demo made (`runs/sample`):

- `gamut-local ...` (or `.venv/bin/gamut-local ...`) runs in-process as typed, with the fake
  engine wherever a model would load (`tests/support/fake_engine.py`), a stand-in model folder for
  every model config under $GAMUT_MODEL_CACHE, a stand-in Hugging Face cache holding every hub
  id the configs name, and three sample questions standing in for the GAMUT release (in
  data/gamut/, where scripts/fetch_data.py writes it); it must exit 0.
- `make demo [VAR=value ...]` runs the `gamut-local` line of the Makefile's demo recipe with
  those variables (as `make -n` prints it); `make X` must name a target of the Makefile.
- Commands that need a GPU node or a cluster (`srun ...`), or that serve until stopped
  (`gamut-local view`), are checked with `--help` only; `slurm ... --submit` runs without
  `--submit` (the dry run checks what a submission checks, and no cluster exists here).
- `python -m gamut_local...` runs for real; `python -m vllm...` (a server for a GPU node) must
  name a module that exists. `python scripts/X.py ARGS` is checked, not run: the
  script exists and defines every option given (the benchmarks take minutes, fetch_data.py
  needs the internet).
- Set-up lines (pip, venv, `source .venv/bin/activate`, `bash scripts/...` or `.ci/...`, also under `sudo` or after `VAR=value`),
  `cat FILE` and `$EDITOR FILE` are checked for the files they name (an editor is not opened);
  `cp A B` copies. SLURM's own `sinfo` and `squeue` are taken as shown (no cluster here).

Anything else fails, naming FILE:LINE, so a new kind of command gets its rule here.

Commands written inline in prose (`` `gamut-local view RUN_DIR --port 8765` ``) are not run, but
their command and every `--option` they show must exist (`--help` says so).
"""

from __future__ import annotations

import glob
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SHELLS = {"bash", "sh", "shell", "console"}


@dataclass
class Command:
    file: str
    line: int
    argv: list[str]
    heredoc: str | None = None

    def where(self) -> str:
        return f"{self.file}:{self.line}: `{shlex.join(self.argv)}`"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def commands(path: Path, root: Path = ROOT) -> list[Command]:
    """The commands of every fenced shell block of a Markdown file, with their line numbers."""
    rel, out = str(path.relative_to(root)), []
    lines = path.read_text(encoding="utf-8").splitlines()
    fence, i = None, 0
    while i < len(lines):
        text, i = lines[i], i + 1
        if text.lstrip().startswith("```"):
            fence = text.strip()[3:].strip() if fence is None else None
            continue
        if fence not in SHELLS or not text.strip():
            continue
        start = i
        while text.endswith("\\") and i < len(lines):
            text, i = text[:-1] + " " + lines[i].strip(), i + 1
        argv = shlex.split(text.strip().removeprefix("$ "), comments=True)
        if not argv:
            continue
        heredoc = None
        if "<<" in text:  # cat > FILE <<'EOF' ... EOF
            end = text.split("<<", 1)[1].strip().strip("'\"")
            body = []
            while lines[i].strip() != end:
                body.append(lines[i])
                i += 1
            i += 1
            heredoc = "\n".join(body) + "\n"
            argv = [a for a in argv if not a.startswith("<<") and a.strip("'\"") != end]
        out.append(Command(rel, start, argv, heredoc))
    return out


# ------------------------------------------------------------------ the scratch project


def _fake_model(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"architectures": ["Fake"]}')


def _fake_hub_model(hub: Path, repo_id: str) -> None:
    """A hub id as huggingface_hub's cache lays it out (refs/main -> snapshots/<commit>/)."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text("0" * 40)
    _fake_model(repo / "snapshots" / ("0" * 40))


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    ws = tmp_path / "project"
    ws.mkdir()
    for name in ("configs", "results"):
        shutil.copytree(ROOT / name, ws / name)
    for name in ("gamut_local", "scripts", "slurm", "Makefile", "pyproject.toml"):
        (ws / name).symlink_to(ROOT / name)
    models, hub = tmp_path / "models", tmp_path / "hub"
    for config in sorted((ROOT / "configs").glob("*/*.yaml")):
        path = (yaml.safe_load(config.read_text()) or {}).get("path")
        if isinstance(path, str) and path.startswith("${GAMUT_MODEL_CACHE"):
            _fake_model(models / path.split("}/", 1)[1])
        elif isinstance(path, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", path):
            _fake_hub_model(hub, path)
    # The release's stand-in where scripts/fetch_data.py puts it: the sample's first three
    # questions (a run on it stays short).
    sample = (ROOT / "gamut_local/data/sample/questions.jsonl").read_text(encoding="utf-8").splitlines()
    (ws / "data" / "gamut").mkdir(parents=True)
    (ws / "data" / "gamut" / "gamut.jsonl").write_text("\n".join(sample[:3]) + "\n", encoding="utf-8")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("GAMUT_MODEL_CACHE", str(models))
    monkeypatch.delenv("GAMUT_DATA", raising=False)
    monkeypatch.delenv("GAMUT_RUNS", raising=False)
    # The pages' cluster commands are for a GPU cluster: the local test cluster that CI runs
    # (far smaller) must not stand in for it when the dry run checks requests against sinfo.
    import gamut_local.cluster.slurm

    monkeypatch.setattr(gamut_local.cluster.slurm, "cluster_nodes", lambda: None)
    monkeypatch.chdir(ws)
    return ws


# ------------------------------------------------------------------ running one command


def _expand(args: list[str]) -> list[str]:
    out = []
    for a in args:
        hits = sorted(glob.glob(a)) if any(c in a for c in "*?[") else []
        out.extend(hits or [a])
    return out


def _gamut(argv: list[str]) -> tuple[int, str]:
    from typer.testing import CliRunner

    from gamut_local.cli.main import app

    if argv[:1] == ["view"]:  # serves until stopped; tests/viewer start it
        argv = ["view", "--help"]
    argv = [a for a in argv if a != "--submit"]
    res = CliRunner().invoke(app, _expand(argv))
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        return 2, f"{res.output}\n{res.exception!r}"
    return res.exit_code, res.output


def _demo_line(argv: list[str]) -> str:
    """The `gamut-local` line `make demo ARGS` runs, as `make -n` prints it (nothing is run)."""
    shown = subprocess.run(["make", "-n", "-f", str(ROOT / "Makefile"), "demo", *argv], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout
    line = next(x for x in shown.splitlines() if "bin/gamut-local " in x)
    return shlex.join(shlex.split(line)).removeprefix(".venv/bin/")


def _make(argv: list[str]) -> tuple[int, str]:
    """`make TARGET [VAR=value]`: the target exists; `demo` runs its `gamut-local` line as make
    would write it (`make -n` prints the recipe, running nothing)."""
    target = next((a for a in argv if "=" not in a), "")
    if not re.search(rf"^{re.escape(target)}:", (ROOT / "Makefile").read_text(), re.M):
        return 1, f"the Makefile has no target {target!r}"
    if target != "demo":
        return 0, ""
    return _gamut(shlex.split(_demo_line([a for a in argv if a != "demo"]))[1:])


def _script(argv: list[str]) -> tuple[int, str]:
    """`python scripts/X.py ARGS`: the script exists and defines every option given."""
    script = ROOT / argv[0]
    if not script.is_file():
        return 1, f"{argv[0]} does not exist"
    source = script.read_text()
    options = [a.split("=")[0] for a in argv[1:] if a.startswith("--")]
    unknown = [o for o in options if f'"{o}"' not in source]
    return (1, f"{argv[0]} defines no option {unknown}") if unknown else (0, "")


def _python_module(argv: list[str], monkeypatch) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", argv)
    try:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=False)
    except SystemExit as e:
        return (0 if e.code in (None, 0) else 1), str(e)
    return 0, ""


def _vllm_serve(args: list[str]) -> tuple[int, str]:
    """`vllm serve MODEL --flags`: parsed by the installed vLLM's `serve` subcommand parser, as
    vllm/entrypoints/cli/main.py builds it (nothing starts)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return 1, "vllm is not installed here: its flags cannot be checked"
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
    try:
        parser.parse_args(["serve", *args])
    except SystemExit as e:
        return 1, f"vllm serve refused its flags (exit {e.code})"
    return 0, ""


def _exists(paths: list[str]) -> tuple[int, str]:
    missing = [p for p in paths if not p.startswith("-") and not Path(p).exists()]
    return (1, f"not found: {missing}") if missing else (0, "")


def run_one(cmd: Command, monkeypatch) -> tuple[int, str]:
    argv = list(cmd.argv)
    if "&&" in argv:  # each part in turn, as the shell would
        at = argv.index("&&")
        code, out = run_one(Command(cmd.file, cmd.line, argv[:at]), monkeypatch)
        return (code, out) if code else run_one(Command(cmd.file, cmd.line, argv[at + 1:]), monkeypatch)
    if cmd.heredoc is not None and argv[:2] == ["cat", ">"]:
        Path(argv[2]).parent.mkdir(parents=True, exist_ok=True)
        Path(argv[2]).write_text(cmd.heredoc)
        return 0, ""
    if re.fullmatch(r"[A-Z_]+=\S*", argv[0]):  # `CI=true bash .ci/run`: the command, with that variable
        return run_one(Command(cmd.file, cmd.line, argv[1:], cmd.heredoc), monkeypatch)
    if argv[0] == "sudo":  # as root: the same command
        return run_one(Command(cmd.file, cmd.line, argv[1:], cmd.heredoc), monkeypatch)
    if argv[0] in ("sinfo", "squeue"):  # the cluster's own commands: no cluster in this scratch project
        return 0, ""
    if argv[0] == "srun":  # a GPU node: the command after srun's options, --help only
        rest = argv[next(i for i, a in enumerate(argv[1:], 1) if not a.startswith("-")):]
        return _gamut([rest[1], "--help"]) if rest[0].endswith("gamut-local") else _exists([])
    if argv[0] in ("gamut-local", ".venv/bin/gamut-local"):
        return _gamut(argv[1:])
    if argv[0] == "make":
        return _make(argv[1:])
    if re.fullmatch(r"(\.venv/bin/)?python[\d.]*", argv[0]):
        if argv[1] == "-m" and argv[2].startswith("gamut_local"):
            return _python_module(argv[2:], monkeypatch)
        if argv[1] == "-m" and argv[2] in ("venv", "pip"):
            return 0, ""  # set-up
        if argv[1] == "-m" and argv[2].startswith("vllm."):  # a server on a GPU node: the module exists
            import importlib.util

            found = importlib.util.find_spec(argv[2].rsplit(".", 1)[0]) is not None
            return (0, "") if found else (1, f"no module {argv[2]}")
        if argv[1].startswith("scripts/"):
            return _script(argv[1:])
    if argv[:2] == ["vllm", "serve"]:  # a server on a GPU node: its flags, by vLLM's own parser
        return _vllm_serve(argv[2:])
    if argv[0] in ("pip", ".venv/bin/pip"):
        return 0, ""  # set-up: installs packages, not checkable offline
    if argv[0] == "bash" and argv[1].startswith(("scripts/", ".ci/")):
        return _exists([str(ROOT / argv[1])])
    if argv[0] in ("cat", "$EDITOR", "ls"):
        return _exists(argv[1:])
    if argv[0] == "cp" and len(argv) == 3:
        shutil.copy(argv[1], argv[2])
        return 0, ""
    if argv == ["source", ".venv/bin/activate"]:
        return 0, ""  # set-up: the folder `make` installs into
    return 1, "no rule in tests/test_docs.py for this command: add one"


# ------------------------------------------------------------------ the tests


def test_every_documented_command_runs(project, monkeypatch):
    from tests.support.fake_engine import install

    install(monkeypatch)
    failures = []
    for doc in documents():
        for cmd in commands(doc):
            try:
                code, output = run_one(cmd, monkeypatch)
            except Exception as e:  # a command the rules misread: still named by its line
                code, output = 2, repr(e)
            if code != 0:
                tail = "\n    ".join(output.strip().splitlines()[-15:])
                failures.append(f"{cmd.where()} exited {code}:\n    {tail}")
    assert not failures, "\n".join(failures)


INLINE = re.compile(r"`((?:\.venv/bin/)?gamut-local(?: [^`]*)?)`")


GROUPS = {"verdicts"}  # commands that hold commands (cli/main.py's add_typer)


def _help(argv: list[str]) -> tuple[int, str]:
    from typer.testing import CliRunner

    from gamut_local.cli.main import app

    res = CliRunner().invoke(app, [*argv, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    return res.exit_code, res.output


def test_every_command_written_inline_exists_with_its_options():
    failures, helps = [], {}
    for doc in documents():
        for n, text in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for span in INLINE.findall(text):
                words = span.split()[1:]
                name = [] if not words or words[0].startswith("-") else [words[0]]
                if name and name[0] in GROUPS and len(words) > 1:  # `verdicts export`: a group's command
                    name.append(words[1])
                if tuple(name) not in helps:
                    helps[tuple(name)] = _help(name)
                code, shown = helps[tuple(name)]
                options = {re.split(r"[=\]]", w)[0] for w in words if w.lstrip("[").startswith("--")}
                unknown = sorted(o for o in options if o.lstrip("[") not in shown)
                if code != 0 or unknown:
                    failures.append(f"{doc.relative_to(ROOT)}:{n}: `{span}`: "
                                    + (f"no command {name}" if code else f"unknown option(s) {unknown}"))
    assert not failures, "\n".join(failures)


def test_the_readme_says_what_make_demo_runs():
    assert f"`{_demo_line([])}`" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_commands_are_read_with_their_file_and_line(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("text\n```bash\ngamut-local plan a.yaml \\\n    --json   # a comment\n"
                   "cat > b.yaml <<'EOF'\nname: b\nEOF\n```\n```yaml\nnot: a command\n```\n")
    got = [(c.file, c.line, c.argv, c.heredoc) for c in commands(doc, tmp_path)]
    assert got == [("x.md", 3, ["gamut-local", "plan", "a.yaml", "--json"], None),
                   ("x.md", 5, ["cat", ">", "b.yaml"], "name: b\n")]


def test_an_undocumented_kind_of_command_fails_naming_its_line(project, monkeypatch):
    code, why = run_one(Command("docs/x.md", 7, ["curl", "http://example.org"]), monkeypatch)
    assert code == 1 and "no rule" in why
    code, why = run_one(Command("docs/x.md", 8, ["gamut-local", "valdate", "x"]), monkeypatch)
    assert code != 0


def _tracked_texts():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in tracked.splitlines():
        path = ROOT / name
        if path.is_file() and path.suffix not in (".png", ".parquet", ".jpg"):
            yield name, path.read_text(encoding="utf-8", errors="replace")


LINK = re.compile(r"\]\(((?:\.\./)+[^)#\s]*)")  # a Markdown link through `..`
STAGES_OF_WORK = re.compile(r"\b[Ss]tops? \d+\b")


def test_no_file_refers_to_anything_outside_the_repository():
    """What a user clones is the whole project: no tracked file points above the checkout (a
    Markdown link through `..` that leaves it, or the absolute path of the folder holding it),
    and no text names the stages of work it was developed in."""
    outside = str(ROOT.parent).rstrip("/") + "/"
    check_absolute = outside not in ("/", "/tmp/")  # too common a prefix to mean this checkout's parent
    me, bad = Path(__file__).resolve().relative_to(ROOT).as_posix(), []
    for name, text in _tracked_texts():
        if name == me:
            continue
        base = (ROOT / name).parent
        for ref in LINK.findall(text):
            if not (base / ref).resolve().is_relative_to(ROOT):
                bad.append(f"{name}: {ref}")
        if check_absolute and outside in text:
            bad.append(f"{name}: {outside}")
        bad += [f"{name}: {m}" for m in STAGES_OF_WORK.findall(text)]
    assert not bad, bad


def test_the_outside_reference_check_finds_what_it_must(tmp_path):
    assert LINK.findall("[n](../../notes/x.md#a), [r](../results/a.json), not a/../b or (../c)") == [
        "../../notes/x.md", "../results/a.json"]
    assert STAGES_OF_WORK.findall("Stop 39 and stops 36 but not a stopwatch 3") == ["Stop 39", "stops 36"]


def test_the_architecture_module_list_is_up_to_date():
    """docs/architecture.md lists every module by its docstring; add, move or redescribe a
    module, rerun the script."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("architecture_reference",
                                                  ROOT / "scripts" / "architecture_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert page == module.render(page), "run: python scripts/architecture_reference.py"
    for path in (ROOT / "gamut_local").rglob("*.py"):
        name = path.relative_to(ROOT / "gamut_local").as_posix()
        if name == "__init__.py":  # the package itself
            continue
        listed = f"`{name.removesuffix('__init__.py')}`" if path.name == "__init__.py" else f"`{name}`"
        assert listed in page, name
