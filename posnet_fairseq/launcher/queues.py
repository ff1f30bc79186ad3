"""Where jobs run and what the scheduler says about them: SLURM or local processes.

Both submit through submitit. A job's state comes from the scheduler
(``squeue``, or the process table for local jobs), never from ``sacct``:
sacct needs slurmdbd, which many clusters and every single-node test setup
lack. A job the scheduler no longer lists has ended; its result pickle (or
its absence) says how.
"""
import os
import shutil
import subprocess
from dataclasses import dataclass

from .units import callable_of, job_folder, submitit_module

# squeue states of a job that may still produce a result.
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
                    "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED",
                    "RESV_DEL_HOLD", "SPECIAL_EXIT"})
# Above the 60 s for which sinfo retries a missing configuration file before it gives up.
SINFO_TIMEOUT_S = 90


@dataclass(frozen=True)
class JobState:
    """What the scheduler says: a state (squeue's, e.g. RUNNING) and its reason."""

    state: str
    reason: str = ""

    @property
    def active(self):
        return self.state in ACTIVE


class SlurmUnavailable(RuntimeError):
    """No SLURM here: its commands are missing, no cluster answers, or it has no such partition."""


def check_cluster(partition=None):
    """Raises :class:`SlurmUnavailable`, with SLURM's own words and what to check, when no cluster answers here
    (no configuration, no controller) or it has no partition ``partition``: before a run prepares anything,
    since sbatch would fail the same way only once the first job is submitted (issue 49)."""
    conf = os.environ.get("SLURM_CONF")
    where = f"SLURM_CONF={conf}" if conf else "/etc/slurm/slurm.conf, or SLURM_CONF"
    fix = f"check the cluster's configuration ({where}) and that its controller runs (scontrol ping), or run on a " \
          "login node of the cluster, or use the local launcher"
    try:
        run = subprocess.run(["sinfo", "--noheader", "--format=%R"], capture_output=True, text=True,
                             timeout=SINFO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(f"SLURM does not answer here (sinfo gave no answer in {SINFO_TIMEOUT_S} s): {fix}") \
            from None
    if run.returncode != 0:
        said = (run.stderr.strip() or run.stdout.strip() or f"exit status {run.returncode}").splitlines()[-1]
        raise SlurmUnavailable(f"SLURM does not answer here (SLURM: {said}): {fix}")
    partitions = sorted(set(run.stdout.split()))
    if partition is not None and partition not in partitions:
        raise SlurmUnavailable(f"--partition {partition}: the cluster has no such partition (sinfo lists "
                               f"{', '.join(partitions) or 'none'})")


class SlurmQueue:
    """Jobs on a SLURM cluster, through sbatch (submitit), squeue and scancel."""

    name = "slurm"
    # afterok dependencies are SLURM's: a dependent job may be queued before its
    # dependencies finish, and it still runs when the driver has died.
    queues_dependents = True

    def __init__(self, options):
        missing = [c for c in ("sbatch", "squeue", "scancel", "sinfo") if shutil.which(c) is None]
        if missing:
            raise SlurmUnavailable(f"the slurm launcher needs SLURM's {', '.join(missing)} on PATH "
                                   "(run it on a cluster's login node, or use the local launcher)")
        self.options = options
        check_cluster(options.partition)

    def submit(self, unit, run_dir, dependency_ids=()):
        executor = submitit_module().SlurmExecutor(folder=job_folder(run_dir, unit))
        executor.update_parameters(**(unit.options or self.options).parameters(unit, dependency_ids))
        return executor.submit(callable_of(unit)).job_id

    def states(self, job_ids):
        """{job id: JobState} for the ids squeue still knows (one squeue call)."""
        if not job_ids:
            return {}
        run = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i|%T|%r", "--jobs=" + ",".join(job_ids)],
                             capture_output=True, text=True)
        if run.returncode != 0:
            # squeue fails when it knows none of the ids (they all ended long ago).
            if "Invalid job id" in run.stderr:
                return {}
            raise RuntimeError(f"squeue --jobs={','.join(job_ids)} failed: {run.stderr.strip()}")
        states = {}
        for line in run.stdout.splitlines():
            job_id, state, reason = line.strip().split("|", 2)
            states[job_id] = JobState(state, "" if reason == "None" else reason)
        return states

    def cancel(self, job_id):
        # No check: a job that ended meanwhile needs no cancelling.
        subprocess.run(["scancel", job_id], capture_output=True)


class LocalQueue:
    """Local processes through submitit's LocalExecutor (unit tests, one machine).

    A local job's id is its process id. Dependencies are the driver's: a
    dependent unit starts once its dependencies have finished.
    """

    name = "local"
    queues_dependents = False

    def __init__(self, options):
        self.options = options
        self._jobs = {}

    def submit(self, unit, run_dir, dependency_ids=()):
        executor = submitit_module().LocalExecutor(folder=job_folder(run_dir, unit))
        executor.update_parameters(timeout_min=int(self.options.time_minutes))
        job = executor.submit(callable_of(unit))
        self._jobs[job.job_id] = job
        return job.job_id

    def states(self, job_ids):
        states = {}
        for job_id in job_ids:
            job = self._jobs.get(job_id)
            if job is not None:
                running = not job.done()
            else:
                # A process a previous driver started: alive while /proc lists it.
                running = os.path.exists(f"/proc/{job_id}")
            if running:
                states[job_id] = JobState("RUNNING")
        return states

    def cancel(self, job_id):
        job = self._jobs.get(job_id)
        if job is not None:
            job.cancel()
        elif os.path.exists(f"/proc/{job_id}"):
            os.kill(int(job_id), 15)


QUEUES = {queue.name: queue for queue in (SlurmQueue, LocalQueue)}
