"""Running units of work as cluster jobs (SLURM through submitit) or local processes.

A low layer: it knows commands and callables, not comparisons or recipes.
`posnet-compare` and the table recipes are to build their units on it
(docs/cluster.md).

    from posnet_fairseq.launcher import Launcher, SlurmOptions, Unit
    units = [Unit("train.rposnet.1", command=("fairseq-train", ...)),
             Unit("average.rposnet.1", command=(...), after=("train.rposnet.1",))]
    outcomes = Launcher("runs/x", "slurm", SlurmOptions(gpus_per_job=1, partition="gpu")).run(units)
"""
from .lock import LOCK_FILE, RunLock, RunLocked
from .queues import SlurmUnavailable, submitit_module
from .run import FAILED, FINISHED, NOT_RUN, Event, Launcher, Outcome, event_line
from .state import STATE_FILE
from .units import SlurmOptions, Unit, render_batch_script

__all__ = ["Event", "FAILED", "event_line", "FINISHED", "Launcher", "LOCK_FILE", "NOT_RUN", "Outcome", "RunLock",
           "RunLocked", "STATE_FILE", "SlurmOptions", "SlurmUnavailable", "Unit", "render_batch_script",
           "submitit_module"]
