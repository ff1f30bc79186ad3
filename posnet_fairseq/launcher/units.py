"""What the launcher runs: named units of work, the sbatch options, the batch script.

A unit is one job: a command line (an (architecture, seed) training, a
translation, an averaging step) or a picklable Python callable. A unit must be
resumable, since a failed, cancelled or requeued job runs it again from the
start of its batch script: a fairseq training resumes from its
``checkpoint_last.pt``.
"""
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional, Tuple

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+=-]*")


@dataclass(frozen=True)
class Unit:
    """One unit of work, one job.

    ``name`` names its folder (``<run dir>/jobs/<name>``) and its record in the
    state file, so a re-run finds it again; ``after`` names the units that must
    finish first (SLURM ``--dependency=afterok``); ``options``, when set, are its
    job's instead of the launcher's (a training on several GPUs, its scoring on one).
    """

    name: str
    command: Tuple[str, ...] = ()
    function: Optional[Callable[[], object]] = None
    after: Tuple[str, ...] = ()
    cwd: Optional[str] = None
    options: Optional["SlurmOptions"] = None

    def __post_init__(self):
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"unit name {self.name!r}: use letters, digits and _.+=- (it names a folder)")
        if bool(self.command) == (self.function is not None):
            raise ValueError(f"unit {self.name!r}: give either a command or a function, not both or neither")
        object.__setattr__(self, "command", tuple(str(a) for a in self.command))
        object.__setattr__(self, "after", tuple(self.after))

    def describe(self):
        if self.command:
            return shlex.join(self.command)
        return f"python callable {getattr(self.function, '__qualname__', repr(self.function))}"


@dataclass(frozen=True)
class SlurmOptions:
    """The sbatch options every job of a run gets.

    ``sbatch`` holds further options by their long name without dashes,
    e.g. ``{"account": "nmt", "qos": "high", "constraint": "a100"}``;
    a value ``True`` is a flag without a value.
    """

    gpus_per_job: int = 0  # per node of the job
    cpus_per_job: int = 1
    partition: Optional[str] = None
    time_minutes: int = 24 * 60
    sbatch: Mapping[str, object] = field(default_factory=dict)
    # A job of several nodes runs its unit once per node (one task each, submitit's srun),
    # e.g. a torchrun that reads its node rank from $SLURM_NODEID.
    nodes: int = 1

    def __post_init__(self):
        for flag in ("gpus_per_job", "cpus_per_job", "time_minutes", "nodes"):
            if int(getattr(self, flag)) < (1 if flag != "gpus_per_job" else 0):
                raise ValueError(f"SlurmOptions.{flag}={getattr(self, flag)}: too small")
        clashing = {"dependency", "job-name", "job_name", "output", "error"} & set(self.sbatch)
        if clashing:
            raise ValueError(f"SlurmOptions.sbatch sets {sorted(clashing)}, which the launcher sets per unit")

    def parameters(self, unit, dependency_ids=()):
        """The keyword arguments of submitit's SlurmExecutor for `unit`.

        The same dictionary submits the job and renders the dry run, so the
        printed script is the submitted one.
        """
        additional = dict(self.sbatch)
        # A preempted job goes back to the queue (same job id) and its unit resumes.
        additional.setdefault("requeue", True)
        if dependency_ids:
            additional["dependency"] = "afterok:" + ":".join(dependency_ids)
        params = dict(job_name=unit.name, time=int(self.time_minutes), cpus_per_task=int(self.cpus_per_job),
                      additional_parameters=additional)
        if self.gpus_per_job:
            params["gpus_per_node"] = int(self.gpus_per_job)
        if self.partition:
            params["partition"] = self.partition
        if self.nodes > 1:
            params.update(nodes=int(self.nodes), ntasks_per_node=1)
        return params


def submitit_module():
    try:
        import submitit
    except ImportError as error:
        raise ImportError("the launcher (posnet_fairseq/launcher) needs submitit: "
                          "pip install submitit==1.5.4 (requirements/runtime.txt)") from error
    return submitit


def job_folder(run_dir, unit):
    """The folder submitit writes a unit's job files to: scripts, pickles, logs;
    ``%j`` is the job id (submitit and sbatch fill it in)."""
    return Path(run_dir) / "jobs" / unit.name / "%j"


def callable_of(unit):
    """The callable a job runs: a command line goes through submitit's CommandFunction
    (its stdout streams into the job's log and is also the job's result)."""
    if unit.function is not None:
        return unit.function
    return submitit_module().helpers.CommandFunction(list(unit.command), cwd=unit.cwd)


def render_batch_script(unit, options, run_dir, python="python"):
    """The batch script sbatch would get for `unit`, for a dry run.

    The job runs submitit's wrapper, which loads the pickled unit from the
    job folder; the header says which command line that is. The job ids of
    the units it waits for exist only once they are submitted: the script
    names them ``<unit>``.
    """
    slurm = submitit_module().slurm.slurm
    folder = job_folder(run_dir, unit)
    wrapper = " ".join([python, "-u -m submitit.core._submit", shlex.quote(str(folder))])
    # _make_sbatch_string is the function SlurmExecutor renders every script with.
    script = slurm._make_sbatch_string(command=wrapper, folder=folder,
                                       **options.parameters(unit, tuple(f"<{name}>" for name in unit.after)))
    first, rest = script.split("\n", 1)
    return f"{first}\n# unit {unit.name}: {unit.describe()}\n{rest}"
