"""The one slot-based process pool: child processes, at most one per slot at a time.

A slot is a set of environment overrides (one CPU thread, one GPU's
``CUDA_VISIBLE_DEVICES``, one distributed rank). ``posnet-compare`` trains and
translates its models through it, and ``posnet_fairseq.table_runs.launch``
starts its data-parallel ranks. The children are Python modules started with
the interpreter's safe-path mode (``-P``): ``python -m`` would otherwise put
the current directory first on ``sys.path``, and a stray ``posnet_fairseq``
there would be imported instead of the installed plugin that ``--user-dir``
names (fairseq then fails with "not globally unique").
"""
import subprocess
import sys
import time
from typing import Callable, Dict, Hashable, Iterable, NamedTuple, Optional, Sequence


def python_command(module, *args):
    """The command line that runs ``python -m module args`` in this interpreter, safe from the current
    directory's packages (see the module docstring)."""
    return [sys.executable, "-P", "-m", module, *args]


class Job(NamedTuple):
    process: object  # subprocess.Popen
    slot: int
    started: float  # time.time() at its start


class ProcessPool:
    """Runs keyed jobs, one per slot at a time, in the order given. ``start(key, slot_env)`` starts a job and
    returns its Popen; ``finish(key, process)`` is called once it has exited. On an exception (Ctrl-C, or a
    SIGTERM turned into one) the running jobs are terminated, ``stopped(key, process)`` is called for each,
    and the exception goes on."""

    jobs_stop_with_runner = True  # its children: what stops this process (SIGSTOP of its group, a suspend) stops them

    def __init__(self, slots: Sequence[dict], poll_seconds: float = 0.5):
        self.slots = list(slots)
        self.poll_seconds = poll_seconds
        self.running: Dict[Hashable, Job] = {}

    def popen(self, command, **kwargs):
        """Starts one job's process (``start`` calls it; :class:`posnet_fairseq.launcher.pool.JobPool`
        submits a cluster job instead)."""
        return subprocess.Popen(command, **kwargs)

    def run(self, keys: Iterable[Hashable], start: Callable, finish: Callable, stopped: Optional[Callable] = None,
            every: Optional[Callable] = None, stop_on_failure: bool = False):
        """``every()`` is called after each poll; with ``stop_on_failure`` a job that exits non-zero stops the
        others (``stopped`` is called for them) and the queue."""
        queue = list(keys)
        try:
            while queue or self.running:
                busy = {job.slot for job in self.running.values()}
                free = [slot for slot in range(len(self.slots)) if slot not in busy]
                while queue and free:
                    key, slot = queue.pop(0), free.pop(0)
                    self.running[key] = Job(start(key, self.slots[slot]), slot, time.time())
                for key, job in list(self.running.items()):
                    if job.process.poll() is None:
                        continue
                    del self.running[key]
                    finish(key, job.process)
                    if stop_on_failure and job.process.returncode != 0:
                        queue.clear()
                        self.stop(stopped)
                if every is not None:
                    every()
                if queue or self.running:
                    time.sleep(self.poll_seconds)
        except BaseException:
            self.stop(stopped)
            raise

    def stop(self, stopped: Optional[Callable] = None):
        """Terminates the running jobs and waits for them."""
        for key, job in list(self.running.items()):
            job.process.terminate()
            job.process.wait()
            del self.running[key]
            if stopped is not None:
                stopped(key, job.process)
