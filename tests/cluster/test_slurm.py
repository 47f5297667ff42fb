"""The SLURM job graph: rendered scripts, a fake `sbatch` on PATH, dependencies and resume.

`sbatch`/`squeue` cannot run here, so small stand-ins (conftest.py's `fake_site`) record what they
are given and print job ids the way `sbatch --parsable` does. The job scripts themselves are
real: they pass `bash -n`, and one is executed with bash (with a stand-in launcher in place
of `gamut-local`) to check the array index -> (variant, shard) mapping and the done marker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from gamut_local.cluster.graph import compress_indices
from gamut_local.cluster.slurm import dry_run_text, prepare, submit
from gamut_local.config import PROJECT_ROOT
from gamut_local.errors import InputError
from tests.support import processes

ROOT = PROJECT_ROOT
BASH = shutil.which("bash")

FAKE_SQUEUE = f"""#!{sys.executable}
import os
print("\\n".join(os.environ.get("FAKE_SQUEUE_IDS", "").split()))
"""

# The site's nodes (the request check): two GPU nodes, one CPU node in the default partition.
NODES = ("gpu-01|gpu|64|512000|gpu:h100:4(S:0-1)|2-00:00:00", "gpu-02|gpu|64|512000|gpu:h100:4(S:0-1)|2-00:00:00",
         "cpu-01|short*|32|128000|(null)|4:00:00")


@pytest.fixture
def cluster(fake_site, tmp_path):
    """A fake sbatch/sinfo on PATH and a run config with three models and two judges."""
    fake_site.partitions(*NODES)
    launcher = fake_site.launcher
    (tmp_path / "ref.jsonl").write_text(
        json.dumps({"question_id": "q1", "model": "reference", "variant": "multimodal", "response": "r"}) + "\n")
    # A submission checks every model folder first: empty ones with a config.json stand in.
    for name in ("small", "big", "texty", "ja", "jr"):
        (tmp_path / "models" / name).mkdir(parents=True)
        (tmp_path / "models" / name / "config.json").write_text("{}")
    models = tmp_path / "models"
    config = {
        "name": "t", "dataset": "data.jsonl", "output_dir": "run",
        "models": [
            {"name": "small", "path": f"{models}/small"},
            {"name": "big", "path": f"{models}/big", "engine": {"tensor_parallel_size": 2}},
            {"name": "texty", "path": f"{models}/texty", "vision": False},
        ],
        "variants": ["multimodal", "text_only"],
        "judges": [
            {"name": "judge-a", "path": f"{models}/ja", "engine": {"tensor_parallel_size": 4}},
            {"name": "judge-ray", "path": f"{models}/jr", "nodes": 2,
             "engine": {"tensor_parallel_size": 4,
                        "extra": {"pipeline_parallel_size": 2, "distributed_executor_backend": "ray"}}},
        ],
        "extra_answers": ["ref.jsonl"],
        "slurm": {"partition": "gpu", "account": "lab", "qos": "high", "gpus_per_node": 4,
                  "shards_generate": 3, "shards_judge": 2, "max_concurrent": 5,
                  "extra_sbatch": ["--constraint=h100", "#SBATCH --mail-type=FAIL"],
                  "setup": ["export GAMUT_TEST_SETUP=yes"], "launcher": str(launcher)},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _calls(tmp_path: Path) -> list[dict]:
    log = tmp_path / "sbatch.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _by_name(calls: list[dict]) -> dict[str, dict]:
    out = {}
    for i, c in enumerate(calls):
        name = re.search(r"#SBATCH --job-name=(\S+)", c["script"]).group(1)
        c["id"] = str(5000 + i)
        c["opts"] = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in c["argv"][:-1] if "=" in a}
        out[name] = c
    return out


def _gpus(script: str) -> int:
    return int(re.search(r"#SBATCH --gres=gpu:(\d+)", script).group(1))


def _mark_done(config: Path, *markers: str) -> None:
    """Done markers as the job scripts write them: each holding its job's key."""
    keys = {m: j.done_key for j in prepare(config).jobs for m in j.markers} | {"score": "", "report": ""}
    done = config.parent / "run" / "slurm" / "done"
    done.mkdir(parents=True, exist_ok=True)
    for m in markers:
        (done / m).write_text(keys[m] + "\n")


def test_compress_indices():
    assert compress_indices([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert compress_indices([3]) == "3" and compress_indices([4, 3]) == "3-4"


SYSTEMS = "small.multimodal small.text_only big.multimodal big.text_only texty.text_only reference.multimodal"


def test_submit_builds_arrays_gpus_and_the_dependency_chain(cluster, tmp_path):
    submission = prepare(cluster)
    records = submit(submission, echo=lambda s: None)
    jobs = _by_name(_calls(tmp_path))
    assert len(jobs) == len(records) == 3 + 2 + 2
    gen = {m: jobs[f"t.gen.{m}"] for m in ("small", "big", "texty")}
    # One array per model, a task per shard answering every variant; one GPU for small, TP2 for
    # big; texty has no vision.
    assert gen["small"]["opts"]["--array"] == "0-2%5" and gen["texty"]["opts"]["--array"] == "0-2%5"
    assert [_gpus(gen[m]["script"]) for m in ("small", "big", "texty")] == [1, 2, 1]
    assert "VARIANTS=(multimodal text_only)" in gen["small"]["script"]
    assert "VARIANTS=(text_only)" in gen["texty"]["script"]
    assert all("--dependency" not in g["opts"] for g in gen.values())
    judge_ids = []
    for j in ("judge-a", "judge-ray"):
        # One array per judge: each task grades every system (given answers too) on its shard,
        # after every generation it grades.
        job = jobs[f"t.judge.{j}"]
        judge_ids.append(job["id"])
        assert job["opts"]["--array"] == "0-1%5"
        assert job["opts"]["--dependency"] == "afterok:" + ":".join(gen[m]["id"] for m in ("small", "big", "texty"))
        assert f"SYSTEMS=({SYSTEMS})" in job["script"] and "--model" not in job["script"]
        assert _gpus(job["script"]) == 4
        if j == "judge-ray":
            assert "#SBATCH --nodes=2" in job["script"] and "ray start" in job["script"] and " --head " in job["script"]
        else:
            assert "#SBATCH --nodes=1" in job["script"] and "ray start" not in job["script"]
    score, report = jobs["t.score"], jobs["t.report"]
    assert score["opts"]["--dependency"] == "afterok:" + ":".join(judge_ids)
    assert report["opts"]["--dependency"] == f"afterok:{score['id']}"
    assert "--array" not in score["opts"] and "--gres" not in score["script"]
    for c in jobs.values():  # site settings and the task environment in every script
        s = c["script"]
        assert "#SBATCH --partition=gpu" in s and "#SBATCH --account=lab" in s and "#SBATCH --qos=high" in s
        assert "#SBATCH --constraint=h100" in s and "#SBATCH --mail-type=FAIL" in s
        assert "#SBATCH --requeue" in s and "export HF_HUB_OFFLINE=1" in s
        assert "export VLLM_WORKER_MULTIPROC_METHOD=spawn" in s and "export GAMUT_TEST_SETUP=yes" in s
    recorded = json.loads((tmp_path / "run" / "slurm" / "jobs.json").read_text())
    (sub,) = recorded["submissions"]
    assert [r["job_id"] for r in sub["jobs"]] == [str(5000 + i) for i in range(7)]
    assert sub["jobs"][-1]["key"] == "report" and sub["jobs"][-1]["after"] == [score["id"]]


def test_every_rendered_script_passes_bash_n(cluster, tmp_path):
    if BASH is None:
        pytest.skip("bash not installed")
    runs = [cluster, ROOT / "configs" / "runs" / "paper-open.yaml", ROOT / "configs" / "runs" / "judge-sweep.yaml"]
    n = 0
    for cfg in runs:  # the paper configs' data is not here: render their scripts without it
        for job in prepare(cfg, check_inputs=cfg == cluster).jobs:
            script = tmp_path / f"{job.key}.sh"
            script.write_text(job.script)
            res = processes.run([BASH, "-n", str(script)], timeout=60, waiting_for="bash's syntax check")
            assert res.returncode == 0, f"{cfg}: {job.key}: {res.stderr}"
            assert "{{" not in job.script
            n += 1
    assert n > 40


def test_resubmitting_skips_complete_shards(cluster, tmp_path):
    _mark_done(cluster, *(f"generate.small.{v}.shard-{i}-of-3" for v in ("multimodal", "text_only") for i in range(3)),
               *(f"generate.big.multimodal.shard-{i}-of-3" for i in range(3)), "generate.big.text_only.shard-1-of-3",
               # judge-a's shard 0 whole, its shard 1 one system short
               *(f"judge.judge-a.{system}.shard-0-of-2" for system in SYSTEMS.split()),
               *(f"judge.judge-a.{system}.shard-1-of-2" for system in SYSTEMS.split() if system != "big.text_only"),
               "score", "report")
    submit(prepare(cluster), echo=lambda s: None)
    jobs = _by_name(_calls(tmp_path))
    assert "t.gen.small" not in jobs
    assert jobs["t.gen.big"]["opts"]["--array"] == "0,2%5"  # a text_only answer missing in shards 0 and 2
    # Judging waits only for the generation resubmitted now; judge-a reruns its one open task.
    after = f"afterok:{jobs['t.gen.big']['id']}:{jobs['t.gen.texty']['id']}"
    assert jobs["t.judge.judge-a"]["opts"] == {**jobs["t.judge.judge-a"]["opts"], "--array": "1%5", "--dependency": after}
    assert jobs["t.judge.judge-ray"]["opts"]["--array"] == "0-1%5"
    # Judging reruns, so scoring and the report run again after it.
    assert jobs["t.score"]["opts"]["--dependency"].count(":") == 2
    assert "t.report" in jobs


def test_a_model_added_to_a_finished_run_reruns_each_judging_task_once(cluster, tmp_path):
    """Every judging task is one marker short: each is resubmitted, loads the judge once and
    grades what is missing (the stage resumes from the files); only the new model generates."""
    _mark_done(cluster, *(m for job in prepare(cluster).jobs for m in job.markers))
    config = yaml.safe_load(cluster.read_text())
    (tmp_path / "models" / "newer").mkdir()
    (tmp_path / "models" / "newer" / "config.json").write_text("{}")
    config["models"].append({"name": "newer", "path": str(tmp_path / "models" / "newer")})
    cluster.write_text(yaml.safe_dump(config))
    submit(prepare(cluster), echo=lambda s: None)
    jobs = _by_name(_calls(tmp_path))
    assert sorted(jobs) == ["t.gen.newer", "t.judge.judge-a", "t.judge.judge-ray", "t.report", "t.score"]
    for j in ("judge-a", "judge-ray"):
        assert jobs[f"t.judge.{j}"]["opts"]["--array"] == "0-1%5"
        assert jobs[f"t.judge.{j}"]["opts"]["--dependency"] == f"afterok:{jobs['t.gen.newer']['id']}"
        assert "newer.multimodal newer.text_only" in jobs[f"t.judge.{j}"]["script"]


def test_nothing_left_submits_nothing(gamut, cluster, tmp_path):
    _mark_done(cluster, *(m for job in prepare(cluster).jobs for m in job.markers))
    assert prepare(cluster).todo == []
    res = gamut("slurm", "--config", cluster, "--submit")
    assert res.exit_code == 0 and "Nothing to submit" in res.output
    assert _calls(tmp_path) == []


def test_a_marker_made_for_other_work_is_not_done(cluster, tmp_path):
    """A done marker holds the key of what its task's work was made for: a reworded check
    reruns every judging task (each grades only what is stale) and no generation; another
    setting of a model reruns that model's generation and, as its answers change, the judging;
    a marker without a key (an older run's) counts as not done."""
    everything = [m for job in prepare(cluster).jobs for m in job.markers]
    _mark_done(cluster, *everything)
    assert prepare(cluster).todo == []
    data = tmp_path / "data.jsonl"
    question = json.loads(data.read_text())
    question["checks"][0]["text"] += " Indeed."
    data.write_text(json.dumps(question) + "\n")
    assert [j.key for j in prepare(cluster).todo] == ["judge.judge-a", "judge.judge-ray", "score", "report"]
    _mark_done(cluster, *everything)
    config = yaml.safe_load(cluster.read_text())
    config["models"][0]["sampling"] = {"temperature": 0.5}
    cluster.write_text(yaml.safe_dump(config))
    todo = {j.key: j.pending for j in prepare(cluster).todo}
    assert list(todo) == ["generate.small", "judge.judge-a", "judge.judge-ray", "score", "report"]
    assert todo["generate.small"] == [0, 1, 2]
    _mark_done(cluster, *everything)
    (tmp_path / "run" / "slurm" / "done" / "generate.big.text_only.shard-2-of-3").write_text("")
    assert {j.key: j.pending for j in prepare(cluster).todo}["generate.big"] == [2]


def test_the_job_script_runs_one_shard_and_marks_it_done(cluster, fake_site, tmp_path):
    if BASH is None:
        pytest.skip("bash not installed")
    job = next(j for j in prepare(cluster).jobs if j.key == "generate.big")
    script = tmp_path / "gen.sh"
    script.write_text(job.script)
    env = {**{k: v for k, v in os.environ.items() if k != "VLLM_CACHE_ROOT"}, "SLURM_ARRAY_TASK_ID": "1",
           "SLURM_ARRAY_JOB_ID": "77", "SLURM_JOB_ID": "78", "TMPDIR": str(tmp_path / "scratch"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    (tmp_path / "scratch").mkdir()
    # 60 s here and below: a job script against stand-ins on PATH, no model.
    res = processes.run([BASH, str(script)], env=env, timeout=60, waiting_for="the job script")
    assert res.returncode == 0, res.stderr
    (call,) = fake_site.launches()  # one engine for both variants of the shard
    assert call["argv"] == ["generate", "--config", str(cluster.resolve()), "--model", "big", "--shard", "1/3"]
    task_tmp = str(tmp_path / "scratch" / "gamut-77-1")
    assert call["env"] == {"HF_HUB_OFFLINE": "1", "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
                           "TMPDIR": task_tmp, "VLLM_CACHE_ROOT": task_tmp + "/vllm", "GAMUT_TEST_SETUP": "yes",
                           "CUDA_VISIBLE_DEVICES": None, "GAMUT_SERVER_URL": None}
    assert not Path(task_tmp).exists()  # per-task scratch is removed on exit
    # ... but vLLM's model-class notes are shared, where vLLM keeps them outside a job.
    assert call["modelinfos"] == str(tmp_path / "xdg" / "vllm" / "modelinfos")
    assert (tmp_path / "xdg" / "vllm" / "modelinfos").is_dir()
    done = tmp_path / "run" / "slurm" / "done"
    assert sorted(p.name for p in done.iterdir()) == job.tasks[1] == [
        "generate.big.multimodal.shard-1-of-3", "generate.big.text_only.shard-1-of-3"]
    # A failing stage leaves no marker, so the shard is resubmitted next time.
    env["SLURM_ARRAY_TASK_ID"] = "0"
    res = processes.run([BASH, str(script)], env={**env, "FAKE_LAUNCHER_RC": "3"}, timeout=60,
                        waiting_for="the job script")
    assert res.returncode == 3
    assert sorted(p.name for p in done.iterdir()) == job.tasks[1]
    assert [j.pending for j in prepare(cluster).jobs if j.key == "generate.big"] == [[0, 2]]


def test_queued_jobs_block_a_second_submission(cluster, fake_site, tmp_path, monkeypatch):
    submit(prepare(cluster), echo=lambda s: None)
    fake_site.add("squeue", FAKE_SQUEUE)
    monkeypatch.setenv("FAKE_SQUEUE_IDS", "5003 99999")
    with pytest.raises(InputError) as e:
        submit(prepare(cluster), echo=lambda s: None)
    assert "still queued or running (5003)" in str(e.value)
    monkeypatch.setenv("FAKE_SQUEUE_IDS", "99999")  # someone else's job only
    assert len(submit(prepare(cluster), echo=lambda s: None)) == 7
    monkeypatch.setenv("FAKE_SQUEUE_IDS", "5010")
    assert len(submit(prepare(cluster), force=True, echo=lambda s: None)) == 7


def test_a_failed_sbatch_is_reported_and_what_went_in_is_recorded(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SBATCH_FAIL_AT", "2")
    with pytest.raises(InputError) as e:
        submit(prepare(cluster), echo=lambda s: None)
    (p,) = e.value.problems
    assert "sbatch failed (exit 1): sbatch: error: Batch job submission failed: Invalid account" in p.message
    assert "generate.small, generate.big" in p.message
    sub = json.loads((tmp_path / "run" / "slurm" / "jobs.json").read_text())["submissions"]
    assert [r["key"] for r in sub[0]["jobs"]] == ["generate.small", "generate.big"]


def test_a_bad_dataset_stops_the_submission_before_any_sbatch(gamut, cluster, tmp_path):
    (tmp_path / "data.jsonl").write_text('{"question_id": "q1", "domain": "d"}\n')
    res = gamut("slurm", "--config", cluster)
    assert res.exit_code == 1 and "data.jsonl:1: question" in res.output
    assert _calls(tmp_path) == [] and not (tmp_path / "run" / "slurm" / "jobs.json").exists()


def _config(tmp_path: Path, **changes) -> Path:
    base = {"name": "x", "dataset": "d.jsonl", "output_dir": "run",
            "models": [{"name": "m", "path": "/m"}], "judges": [{"name": "j", "path": "/j"}]}
    base.update(changes)
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


def test_gpu_layout_problems_are_input_errors(tmp_path):
    cfg = _config(tmp_path, judges=[
        {"name": "huge", "path": "/j", "engine": {"tensor_parallel_size": 16}},
        {"name": "split", "path": "/j", "nodes": 2, "engine": {"tensor_parallel_size": 8}},
    ])
    with pytest.raises(InputError) as e:
        prepare(cfg)
    msgs = [f"{p.field}: {p.message}" for p in e.value.problems]
    assert msgs[0] == ("judges.huge.gpus: needs 16 GPUs but slurm.gpus_per_node is 8; "
                       "set nodes: 2 (Ray across nodes) or a lower parallel size")
    assert msgs[1].startswith("judges.split.engine.extra.distributed_executor_backend: ")


def test_dry_run_prints_scripts_and_commands_and_writes_nothing(gamut, cluster, tmp_path):
    res = gamut("slurm", "--config", cluster, "--dry-run")
    assert res.exit_code == 0, res.output
    assert res.output.count("#!/bin/bash") == 7
    assert "JOB_generate_small=$(sbatch --parsable --array=0-2%5 " in res.output
    assert "--dependency=afterok:$JOB_generate_small:$JOB_generate_big:$JOB_generate_texty " in res.output
    assert _calls(tmp_path) == [] and not (tmp_path / "run").exists()
    text = dry_run_text(prepare(cluster))
    assert text.strip().endswith("report.sbatch | cut -d';' -f1)")


def test_without_a_flag_slurm_only_prints_the_graph(gamut, cluster, tmp_path):
    res = gamut("slurm", "--config", cluster)
    assert res.exit_code == 0, res.output
    assert res.output.count("#!/bin/bash") == 7 and "nothing was submitted or written; add --submit" in res.output
    assert _calls(tmp_path) == [] and not (tmp_path / "run").exists()


def test_a_dry_run_checks_model_folders_as_a_submission_does(gamut, cluster, tmp_path):
    shutil.rmtree(tmp_path / "models" / "big")
    for argv in ((), ("--dry-run",), ("--submit",)):
        res = gamut("slurm", "--config", cluster, *argv)
        assert res.exit_code == 1 and f"path: model folder not found: {tmp_path / 'models' / 'big'}" in res.output
        assert "#!/bin/bash" not in res.output and _calls(tmp_path) == []


def test_a_job_script_works_from_any_submission_directory(cluster, fake_site, tmp_path, monkeypatch):
    """Scripts cd to the folder they were rendered in, so a relative setup line (`source
    .venv/bin/activate`) means the same when sbatch runs somewhere else."""
    if BASH is None:
        pytest.skip("bash not installed")
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    (project / "env.sh").write_text("export GAMUT_TEST_SETUP=from-the-project\n")
    config = yaml.safe_load(cluster.read_text())
    config["slurm"]["setup"] = ["source env.sh"]
    cluster.write_text(yaml.safe_dump(config))
    monkeypatch.chdir(project)
    jobs = prepare(cluster).jobs
    for job in jobs:
        assert job.script.index(f"cd {project}\n") < job.script.index("source env.sh"), job.key
    script = elsewhere / "gen.sh"
    script.write_text(next(j for j in jobs if j.key == "generate.small").script)
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "TMPDIR": str(elsewhere)}
    res = processes.run([BASH, str(script)], cwd=elsewhere, env=env, timeout=60, waiting_for="the job script")
    assert res.returncode == 0, res.stderr
    (call,) = fake_site.launches()
    assert call["cwd"] == str(project) and call["env"]["GAMUT_TEST_SETUP"] == "from-the-project"


def test_cli_submit_and_bad_input(gamut, cluster, tmp_path):
    res = gamut("slurm", "--config", cluster, "--submit")
    assert res.exit_code == 0, res.output
    # 3 generation arrays of 3 tasks, 2 judge arrays of 2, score, report
    assert "Submitted 7 jobs (15 tasks)" in res.output
    res = gamut("slurm", "--config", cluster, "--dry-run", "--submit")
    assert res.exit_code == 1 and "give one of them" in res.output
    res = gamut("slurm", "--config", tmp_path / "missing.yaml")
    assert res.exit_code == 1 and "config file not found" in res.output and "Traceback" not in res.output


def test_the_dry_run_recipe_runs_as_printed(cluster, tmp_path):
    """Write the printed scripts where the recipe says, run its submission lines with bash."""
    if BASH is None:
        pytest.skip("bash not installed")
    text = dry_run_text(prepare(cluster))
    sections = re.split(r"^# ===== (.+) =====\n", text, flags=re.M)[1:]
    recipe = dict(zip(sections[::2], sections[1::2]))
    submission = recipe.pop("submission")
    for path, script in recipe.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(script)
    res = processes.run([BASH, "-euc", submission], env=os.environ, timeout=60, waiting_for="the submission")
    assert res.returncode == 0, res.stderr
    jobs = _by_name(_calls(tmp_path))
    assert len(jobs) == 7
    gens = ":".join(jobs[f"t.gen.{m}"]["id"] for m in ("small", "big", "texty"))
    assert jobs["t.judge.judge-a"]["opts"]["--dependency"] == f"afterok:{gens}"
    assert jobs["t.report"]["opts"]["--dependency"] == f"afterok:{jobs['t.score']['id']}"


FAKE_SRUN = """#!/bin/bash
# srun [opts] -w HOST CMD...: runs CMD "on" HOST (FAKE_NODE=HOST), as each node's own step.
while [[ $# -gt 0 && "$1" != "-w" ]]; do shift; done
host=$2; shift 2
FAKE_NODE="$host" exec "$@"
"""
FAKE_HOSTNAME = """#!/bin/bash
case "$FAKE_NODE" in node-a) echo "10.0.0.1 fe80::1";; node-b) echo "10.0.0.2";; *) echo "10.9.9.9";; esac
"""
FAKE_RAY = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["FAKE_RAY_LOG"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "node": os.environ.get("FAKE_NODE"),
                        "VLLM_HOST_IP": os.environ.get("VLLM_HOST_IP"),
                        "RAY_TMPDIR": os.environ.get("RAY_TMPDIR")}}) + "\\n")
"""


def test_the_ray_script_gives_each_node_its_own_address(cluster, fake_site, tmp_path):
    """judge-ray.sbatch run with stand-ins for scontrol, srun, hostname, ray and python: every
    node's `ray start` gets that node's address as --node-ip-address and VLLM_HOST_IP, Ray a
    short temp dir, and the judge (on the head) the head's address."""
    if BASH is None:
        pytest.skip("bash not installed")
    job = next(j for j in prepare(cluster).jobs if "ray start" in j.script)
    script = tmp_path / "judge-ray.sh"
    script.write_text(job.script)
    fake_site.add("scontrol", "#!/bin/bash\nprintf 'node-a\\nnode-b\\n'\n")
    fake_site.add("srun", FAKE_SRUN)
    fake_site.add("hostname", FAKE_HOSTNAME)
    fake_site.add("ray", FAKE_RAY)
    fake_site.add("python", "#!/bin/bash\necho 2\n")  # the Ray cluster's live node count
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_JOB_ID": "77", "SLURM_JOB_ID": "12345",
           "SLURM_JOB_NODELIST": "node-[a-b]", "TMPDIR": str(tmp_path), "GAMUT_RAY_HEAD_WAIT": "0",
           "FAKE_RAY_LOG": str(tmp_path / "ray.log"), "FAKE_NODE": "node-a"}
    res = processes.run([BASH, str(script)], env=env, timeout=60, waiting_for="the job script")
    assert res.returncode == 0, res.stderr
    starts = [json.loads(x) for x in (tmp_path / "ray.log").read_text().splitlines()]
    starts = sorted((s for s in starts if s["argv"][0] == "start"), key=lambda s: s["node"])
    assert [(s["node"], s["VLLM_HOST_IP"]) for s in starts] == [("node-a", "10.0.0.1"), ("node-b", "10.0.0.2")]
    head, worker = starts
    assert "--head" in head["argv"] and "--node-ip-address=10.0.0.1" in head["argv"]
    assert "--address=10.0.0.1:32345" in worker["argv"] and "--node-ip-address=10.0.0.2" in worker["argv"]
    assert all(s["RAY_TMPDIR"] == "/tmp/ray-12345" for s in starts) and "--temp-dir=/tmp/ray-12345" in head["argv"]
    (call,) = fake_site.launches()
    assert call["argv"][:1] == ["judge"] and call["argv"][-2:] == ["--shard", "1/2"]


# ---------------------------------------------------------------------------------------
# Requests against the partition (cluster/fit.py), from sinfo's own output format.


def test_sinfo_lines_parse_to_nodes():
    from gamut_local.cluster.fit import parse_sinfo

    nodes = parse_sinfo("a|gpu*|64|512000|gpu:h100:8(S:0-1)|2-00:00:00\nb|cpu|32|128000+|(null)|infinite\n"
                        "c|mixed|16|64000|gpu:2,shard:8|30:00\nheader junk\n")
    assert [(n.name, n.partition, n.cpus, n.mem_mb, n.gpus, n.max_hours) for n in nodes] == [
        ("a", "gpu*", 64, 512000, 8, 48.0), ("b", "cpu", 32, 128000, 0, None), ("c", "mixed", 16, 64000, 2, 0.5)]


def test_a_request_no_node_holds_is_named_with_its_setting(cluster, tmp_path):
    from gamut_local.cluster.fit import misfits, parse_sinfo, requests
    from gamut_local.config import load_run_config

    def found(nodes, partition="gpu", **slurm):
        cfg = yaml.safe_load(cluster.read_text())
        cfg["slurm"].update(slurm)
        cluster.write_text(yaml.safe_dump(cfg))
        return misfits(requests(prepare(cluster, check_inputs=False).jobs, load_run_config(cluster).slurm),
                       nodes, partition)

    nodes = parse_sinfo("n1|gpu|24|512000|gpu:4|2-00:00:00\nn2|gpu|24|512000|gpu:4|2-00:00:00\n")
    # 4 GPUs x 8 CPUs per GPU on nodes of 24 cores: the judge arrays (TP 4) cannot start.
    got = found(nodes, cpus_per_gpu=8)
    assert {s for s, _ in got} == {"slurm.cpus_per_gpu"}
    assert [m.split()[1] for _, m in got] == [j.key for j in prepare(cluster).jobs if j.gpus == 4]
    assert "asks for 4 GPUs, 32 CPUs" in got[0][1] and "too much: CPUs (32, slurm.cpus_per_gpu)" in got[0][1]
    got = found(nodes, cpus_per_gpu=4, time_judge="3-00:00:00")
    assert {s for s, _ in got} == {"slurm.time_judge"} and "more than the 48 h limit of partition gpu" in got[0][1]
    # judge-ray spans two nodes: one node that holds its share is not enough.
    got = found(nodes[:1], time_judge="10:00:00")
    assert {s for s, _ in got} == {"nodes"}
    assert "on each of 2 nodes, but 1 of the 1 nodes of partition gpu can hold that" in got[0][1]
    assert found(nodes, "h100") == [("slurm.partition", "partition h100 is not on this cluster (sinfo lists: gpu)")]


def test_the_default_requests_fit_a_common_gpu_node(tmp_path):
    """4 CPUs and 32 GB per GPU: an 8-GPU node with 64 cores and 512 GB holds any one-node task."""
    from gamut_local.cluster.fit import misfits, parse_sinfo, requests
    from gamut_local.cluster.cost import release_shape
    from gamut_local.cluster.graph import run_graph
    from gamut_local.config import load_run_config

    cfg = ROOT / "configs" / "runs" / "paper-open.yaml"
    spec = load_run_config(cfg)
    nodes = parse_sinfo("n1|gpu*|64|515000|gpu:8|2-00:00:00\n")
    assert misfits(requests(run_graph(spec, cfg, release_shape(spec.plan)), spec.slurm), nodes, None) == []


def test_dependants_that_can_never_start_are_cancelled_before_a_resubmission(cluster, fake_site, tmp_path, monkeypatch):
    """Without kill_invalid_depend (SLURM's default) the jobs after a failed task stay PENDING
    forever; a resubmission cancels them (it replaces them) but still refuses over live work."""
    submit(prepare(cluster), echo=lambda s: None)
    fake_site.add("squeue", "#!/bin/sh\nprintf '5005|DependencyNeverSatisfied\\n5006|Dependency\\n5006|Dependency\\n'\n")
    fake_site.add("scancel", f"#!/bin/sh\necho \"$@\" >> {tmp_path}/scancel.log\n")
    lines = []
    with pytest.raises(InputError) as e:
        submit(prepare(cluster), echo=lines.append)
    assert (tmp_path / "scancel.log").read_text().split() == ["5005"]
    assert "could never start" in lines[0] and "5005" in lines[0]
    assert "still queued or running (5006)" in str(e.value)


def test_status_without_slurm_reads_the_files(gamut, cluster, tmp_path, monkeypatch):
    """No scontrol on PATH: `status` counts what is on disk and names each unfinished task's
    log where one was written."""
    submit(prepare(cluster), echo=lambda s: None)  # job ids 5000.. recorded; nothing ran
    run = tmp_path / "run"
    (run / "answers").mkdir(parents=True)
    (run / "answers" / "small.multimodal.shard-0-of-3.jsonl").write_text(json.dumps(
        {"question_id": "q1", "model": "small", "variant": "multimodal", "response": "a cat"}) + "\n")
    _mark_done(cluster, *(f"generate.small.multimodal.shard-{i}-of-3" for i in range(3)))
    log = run / "slurm" / "logs" / "t.gen.small-5000_1.out"
    log.write_text("loading\nValueError: out of memory\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # the fake sbatch only: no scontrol, no squeue
    res = gamut("status", run)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    gen = next(x for x in lines if x.startswith("generate.small"))
    assert "0/3 tasks done" in gen and "small.multimodal: 1/1 answers, small.text_only: 0/1 answers" in gen
    assert f"task 1 (job 5000_1): unknown (no scontrol); log: {log}" in res.output
    assert "task 2 (job 5000_2): unknown (no scontrol); it never started (no log)" in res.output
    # judge-a grades 6 systems; q1 (one check) is answered by small.multimodal and by the given
    # reference answers so far.
    judge = next(x for x in lines if x.startswith("judge.judge-a"))
    assert "0/2 tasks done" in judge and "0/2 verdicts of the answers of 6 systems so far" in judge
    data = json.loads(gamut("status", "--config", cluster, "--json").output)
    assert data["slurm"] is False and data["complete"] is False
    assert {r["key"]: r["tasks_done"] for r in data["rows"]}["generate.small"] == 0
    _mark_done(cluster, *(f"generate.small.text_only.shard-{i}-of-3" for i in range(3)))
    data = json.loads(gamut("status", "--config", cluster, "--json").output)
    assert {r["key"]: r["tasks_done"] for r in data["rows"]}["generate.small"] == 3


def test_a_job_given_gpus_that_are_not_gpus_stops_unless_it_says_it_runs_on_cpu(cluster, fake_site, tmp_path):
    """Fake GPUs (a test cluster's gres on /dev/null) set CUDA_VISIBLE_DEVICES like real ones:
    the job stops with a message naming them, before any engine; GAMUT_FAKE_GPUS=1 clears them."""
    if BASH is None or Path("/dev/nvidia0").exists() or Path("/dev/kfd").exists():
        pytest.skip("needs bash and a machine without GPU devices")
    job = next(j for j in prepare(cluster).jobs if j.key == "generate.small")
    script = tmp_path / "gen.sh"
    script.write_text(job.script)
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_JOB_ID": "9", "TMPDIR": str(tmp_path),
           "CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_GPUS": "0"}
    res = processes.run([BASH, str(script)], env=env, timeout=60, waiting_for="the job script")
    assert res.returncode == 2 and "was given GPUs (CUDA_VISIBLE_DEVICES=0)" in res.stderr
    assert "export GAMUT_FAKE_GPUS=1" in res.stderr and not fake_site.launches()
    res = processes.run([BASH, str(script)], env={**env, "GAMUT_FAKE_GPUS": "1"}, timeout=60,
                        waiting_for="the job script")
    assert res.returncode == 0, res.stderr
    (call,) = fake_site.launches()
    assert call["env"]["CUDA_VISIBLE_DEVICES"] is None
