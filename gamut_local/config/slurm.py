"""The SLURM settings of a run (`slurm:`), and SLURM's time and memory grammar: the patterns
the settings are checked against and their values in hours and MB (`cluster` sizes jobs and
checks them against the partition with these)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, ValidationError, field_validator

from gamut_local.config.base import ConfigModel

# A SLURM time limit: M, M:S, H:M:S, D-H, D-H:M or D-H:M:S (group 1: days; group 2: the rest).
SLURM_TIME = r"(?:(\d+)-)?(\d+(?::\d+){0,2})"
# sbatch --mem: a number (group 1) with an optional K/M/G/T unit (group 2; none: MB).
SLURM_MEM = r"(\d+)([KMGT]?)"
_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def slurm_hours(limit: str) -> float | None:
    """A SLURM time limit in hours: 'M', 'M:S', 'H:M:S', 'D-H', 'D-H:M' or 'D-H:M:S'."""
    match = re.fullmatch(SLURM_TIME, limit.strip())
    if not match:
        return None
    parts = [int(p) for p in match.group(2).split(":")]
    if match.group(1) is not None:
        h, mi, se = (parts + [0, 0])[:3]
    else:
        h, mi, se = ([0] * (3 - len(parts)) + parts) if len(parts) == 3 else (0, *(parts + [0])[:2])
    return int(match.group(1) or 0) * 24 + h + mi / 60 + se / 3600


def mem_mb(text: str) -> int:
    """sbatch memory ('64G', '500M', '1024' = MB) in MB."""
    m = re.fullmatch(SLURM_MEM, text.strip())
    return int(int(m.group(1)) * _MEM_UNITS[m.group(2) or "M"]) if m else 0


SBATCH_WORD = r"^[A-Za-z0-9_.,:+=%-]+$"  # a partition, account or QoS name: one word, no newline
_SBATCH_LINE = re.compile(r"(?:#SBATCH\s+)?(--?[A-Za-z][A-Za-z0-9-]*)(?:[= ](\S.*))?")
_SBATCH_CHECKED = {"--time": SLURM_TIME, "-t": SLURM_TIME, "--mem": SLURM_MEM}


class SlurmSpec(ConfigModel):
    partition: str | None = Field(default=None, pattern=SBATCH_WORD, examples=["gpu"],
                                  description="sbatch --partition. Unset: the cluster's default.")
    account: str | None = Field(default=None, pattern=SBATCH_WORD, examples=["my-lab"],
                                description="sbatch --account.")
    qos: str | None = Field(default=None, pattern=SBATCH_WORD, examples=["normal"],
                            description="sbatch --qos.")
    time_generate: str = Field(default="12:00:00", pattern=f"^{SLURM_TIME}$",
                               description="Time limit of one generation task (sbatch --time).")
    time_judge: str = Field(default="24:00:00", pattern=f"^{SLURM_TIME}$",
                            description="Time limit of one judging task.")
    time_score: str = Field(default="01:00:00", pattern=f"^{SLURM_TIME}$",
                            description="Time limit of the scoring and report job.")
    cpus_per_gpu: int = Field(default=4, ge=1, description=(
        "CPU cores asked for per GPU (a node needs its GPUs x this many cores to run a task on all of them)."))
    mem_per_gpu: str = Field(default="32G", pattern=f"^{SLURM_MEM}$",
                             description="Host memory asked for per GPU.")
    gpus_per_node: int = Field(default=8, ge=1, description=(
        "GPUs on one node of the partition; a task needing more spans nodes."))
    shards_generate: Annotated[int, Field(ge=1)] | dict[str, Annotated[int, Field(ge=1)]] | None = Field(
        default=None, examples=[2, {"qwen3-vl-235b-a22b": 2}], description=(
            "Array tasks of a model's generation array; each answers a slice of the questions in every "
            "variant and loads the model once. A number for every model, or one per model name. Unset "
            "(or a model left out): as many as keep loading at most `plan.max_load_share` of the model's "
            "work, and enough to end within `time_generate` (`plan` shows the counts)."))
    shards_judge: Annotated[int, Field(ge=1)] | dict[str, Annotated[int, Field(ge=1)]] | None = Field(
        default=None, examples=[1, {"qwen3-vl-235b-a22b-fp8": 2}], description=(
            "Array tasks of a judge's array; each grades every system's answers to a slice of the "
            "questions and loads the judge once. A number for every judge, or one per judge name. "
            "Unset: chosen as for `shards_generate`."))
    extra_sbatch: list[str] = Field(default=[], examples=[["--constraint=h100"]], description=(
        "More sbatch options, one per entry; `--time` and `--mem` values are checked."))
    setup: list[str] = Field(default=[], examples=[["module load cuda/12.4", "source .venv/bin/activate"]],
                             description=("Shell lines run at the top of every job, after it has changed "
                                          "to the project folder."))
    cpus_score: int = Field(default=4, ge=1, description="CPU cores of the scoring and report job (no GPU).")
    mem_score: str = Field(default="32G", pattern=f"^{SLURM_MEM}$", description="Memory of the scoring job.")
    max_concurrent: int | None = Field(default=None, ge=1, examples=[4], description=(
        "At most this many tasks of one array at once (the array's %N throttle)."))
    launcher: str = Field(default="gamut-local", examples=["python -m gamut_local.cli"],
                          description="How job scripts call the command line tool.")
    templates: str | None = Field(default=None, examples=["my-slurm-templates"], description=(
        "A folder of your own sbatch templates. Unset: the project's `slurm/`."))
    network_interface: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$",
                                          examples=["ib0"], description=(
        "For judges on several nodes: the network interface the nodes reach each other on. Each "
        "node's Ray, vLLM (VLLM_HOST_IP) and NCCL/Gloo (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME) use "
        "its address there. Unset: the address the node's name resolves to (a loopback one is refused)."))

    @field_validator("shards_generate", "shards_judge", mode="wrap")
    @classmethod
    def _shard_counts(cls, value, handler):
        """One message for a bad count, not one per member of the union."""
        try:
            return handler(value)
        except ValidationError:
            counts = value.items() if isinstance(value, dict) else [(None, value)]
            for name, n in counts:
                if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                    where = f"{name}: " if name is not None else ""
                    raise ValueError(f"{where}must be at least 1, got {n!r}" if isinstance(n, int)
                                     and not isinstance(n, bool) else
                                     f"{where}must be a number of tasks (at least 1), or a mapping of "
                                     f"names to one, got {n!r}") from None
            raise

    @field_validator("extra_sbatch")
    @classmethod
    def _sbatch_lines(cls, lines: list[str]) -> list[str]:
        """Each line one sbatch option (`--name[=value]`); time and memory values checked,
        so `--time=banana` fails here, not in the queue."""
        for line in lines:
            m = _SBATCH_LINE.fullmatch(line.strip())
            if "\n" in line or not m:
                raise ValueError(f"{line!r} is not one sbatch option like --constraint=h100")
            pattern = _SBATCH_CHECKED.get(m.group(1))
            if pattern and not re.fullmatch(pattern, (m.group(2) or "").strip()):
                raise ValueError(f"{line!r}: {m.group(2)!r} is not a valid {m.group(1)} value")
        return lines
