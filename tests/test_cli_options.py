"""The command line's shape: a run config is `--config RUN.yaml` in every command that reads
one (never a positional argument), a shared option means the same in every command, and
`status` takes either the config or a run directory, refusing a config given without --config."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from gamut_local.cli.main import app

RUN_CONFIG_COMMANDS = {"run", "generate", "judge", "score-run", "plan", "slurm", "status"}


def _commands() -> dict[str, object]:
    root = typer.main.get_command(app)
    found = {}
    for name, cmd in root.commands.items():
        subs = getattr(cmd, "commands", None)
        found.update({f"{name} {n}": c for n, c in subs.items()} if subs else {name: cmd})
    return found


def _params(cmd) -> dict[str, object]:
    return {p.name: p for p in cmd.params}


def test_the_run_config_is_the_config_option_in_every_command_that_reads_one():
    commands = _commands()
    taking = {name for name, cmd in commands.items() if "Run YAML" in " ".join(
        getattr(p, "help", "") or "" for p in cmd.params)}
    assert taking == RUN_CONFIG_COMMANDS
    for name in RUN_CONFIG_COMMANDS:
        config = _params(commands[name])["config"]
        assert config.param_type_name == "option" and config.opts == ["--config"], name
        positional = [p.name for p in commands[name].params if p.param_type_name == "argument"]
        assert positional in ([], ["run_dir"]), (name, positional)


def test_a_shared_option_has_one_help_text_everywhere():
    seen: dict[str, set[str]] = {}
    for name, cmd in _commands().items():
        if name == "lint":  # lint's --strict counts its own warnings, not the dataset reader's
            continue
        for p in cmd.params:
            if p.param_type_name == "option" and p.opts[0] in ("--strict", "--limit", "--shard", "--allow-incomplete"):
                seen.setdefault(p.opts[0], set()).add(p.help)
    assert set(seen) == {"--strict", "--limit", "--shard", "--allow-incomplete"}
    assert all(len(helps) == 1 for helps in seen.values()), seen


def test_status_takes_the_config_or_a_run_directory_and_refuses_a_config_given_bare(tmp_path):
    runner = CliRunner()
    cfg = tmp_path / "run.yaml"
    cfg.write_text("name: x\n")
    bare = runner.invoke(app, ["status", str(cfg)])
    assert bare.exit_code == 1 and f"gamut-local status --config {cfg}" in bare.output, bare.output
    neither = runner.invoke(app, ["status"])
    assert neither.exit_code == 1 and "--config RUN.yaml" in neither.output, neither.output
    both = runner.invoke(app, ["status", str(tmp_path), "--config", str(cfg)])
    assert both.exit_code == 1 and "one of them" in both.output, both.output
    assert "Traceback" not in bare.output + neither.output + both.output


def test_plan_and_slurm_take_no_positional_config(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("name: x\n")
    for command in ("plan", "slurm"):
        res = CliRunner().invoke(app, [command, str(cfg)])
        assert res.exit_code == 2 and "--config" in res.output, res.output  # typer's usage error
