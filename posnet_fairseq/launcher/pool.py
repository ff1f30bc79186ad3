"""The process pool's counterpart on a cluster: the same keyed jobs, each one a launcher unit.

:class:`JobPool` has :class:`~posnet_fairseq.process_pool.ProcessPool`'s
interface (``popen``, ``run(keys, start, finish, stopped, every)``,
``running``), so a caller that starts its processes through ``pool.popen``
runs them as SLURM jobs without a change of its own: ``start(key, env)``
opens its log files and calls ``popen`` as it would locally; the pool turns
the command line into a :class:`~posnet_fairseq.launcher.units.Unit` (its
output appended to the caller's files, its environment the caller's) and
submits them all through one :class:`~posnet_fairseq.launcher.run.Launcher`;
``finish(key, process)`` gets a stand-in of the process whose ``returncode``
says how the job ended, as a local exit status would.

The caller keeps its own record of what is done (it asks only for what is
not), so the launcher attaches to a job an earlier driver left running and
submits everything else afresh (``skip_finished=False``). The caller holds the lock of
the run's directory (posnet-compare's --out), so the launcher takes none of its own.
"""
import os
import re
import signal
import time

from ..process_pool import Job
from .run import FAILED, FINISHED, NOT_RUN, Launcher, event_line
from .units import Unit

# The shell that runs a command with its output appended to the caller's files, as the
# local pool's Popen(stdout=..., stderr=...) writes them.
_APPEND = 'out=$1 err=$2; shift 2; exec "$@" >>"$out" 2>>"$err"'
_STATUS = re.compile(r"exit status (-?\d+)")
_SIGNAL = re.compile(r"Signals\.\w+: (\d+)")
ENDS = (FINISHED, FAILED, NOT_RUN)


class JobProcess:
    """What ``finish`` and ``stopped`` get for a job: ``returncode`` (0 when it finished, the command's exit
    status when it failed, minus a signal number when it was killed or cancelled), ``pid`` (the driver's:
    the process that owns the job on this machine) and the unit it runs."""

    def __init__(self, unit, cancel):
        self.unit = unit
        self.pid = os.getpid()
        self.returncode = None
        self._cancel = cancel

    def poll(self):
        return self.returncode

    def terminate(self):
        self._cancel(self.unit.name)

    def wait(self):
        return self.returncode


def returncode(event):
    """A local exit status for a launcher event that ends a unit: 0, the command's exit status, or minus a
    signal number. A job that SLURM ended (cancelled, timed out, preempted, its node failed) or lost reads
    as killed by SIGTERM whatever its command then returned: its checkpoints stay and a re-run resumes it."""
    if event.kind == FINISHED:
        return 0
    if event.message.startswith("ended ") and not event.message.startswith(("ended FAILED", "ended COMPLETED")):
        return -signal.SIGTERM
    status, killed = _STATUS.search(event.message), _SIGNAL.search(event.message)
    if status:
        return int(status.group(1))
    return -int(killed.group(1)) if killed else -signal.SIGTERM


def unit_name(kind, key):
    """The unit of ``key`` (an opaque hashable: a name, or a tuple of parts such as (architecture, seed))."""
    parts = key if isinstance(key, tuple) else (key,)
    return re.sub(r"[^A-Za-z0-9_.+=-]", "_", ".".join([kind, *map(str, parts)]))


class JobPool:
    """Runs keyed command lines as jobs of ``queue`` ("slurm", or "local" for tests) from ``run_dir``.

    ``kind`` names the units (``train.<key>``); ``slot_env`` is the environment each ``start`` gets (the
    job's, e.g. its threads); ``log`` prints the launcher's events (submitted, attached, started, failed
    with its log) as lines of the caller's log."""

    jobs_stop_with_runner = False  # the scheduler's jobs run on while this process is stopped

    def __init__(self, run_dir, queue, options, kind, log, slot_env=None, poll_seconds=10.0):
        self.run_dir, self.queue, self.options, self.kind = run_dir, queue, options, kind
        self.log = log
        self.slot_env = dict(slot_env or {})
        self.poll_seconds = poll_seconds
        self.running = {}
        self._starting = None
        self._launcher = None

    def popen(self, command, stdout, stderr, env):
        """A job for the key being started: ``command`` with its output appended to the files ``stdout`` and
        ``stderr`` (open files; ``subprocess.STDOUT``: the same as stdout) and the variables of ``env`` that
        differ from this process's environment (sbatch passes the rest on)."""
        out = stdout.name
        err = out if not hasattr(stderr, "name") else stderr.name
        changed = [f"{k}={v}" for k, v in sorted(env.items()) if os.environ.get(k) != v]
        unit = Unit(unit_name(self.kind, self._starting),
                    command=("env", *changed, "sh", "-c", _APPEND, "sh", out, err, *command), cwd=os.getcwd())
        return JobProcess(unit, self._cancel)

    def _cancel(self, name):
        job_id = self._launcher.state.job_id(name) if self._launcher else None
        if job_id is not None:
            self._launcher.queue.cancel(job_id)

    def run(self, keys, start, finish, stopped=None, every=None):
        """Starts every key at once (the scheduler decides when each job runs), waits for all, calls
        ``finish`` as each ends; on an exception (Ctrl-C, SIGTERM) cancels the jobs still queued or running,
        calls ``stopped`` for each, and the exception goes on. A driver killed outright leaves its jobs
        running, and the next run attaches to them."""
        by_name = {}
        try:
            for key in keys:
                self._starting = key
                process = start(key, dict(self.slot_env))
                by_name[process.unit.name] = key
                self.running[key] = Job(process, 0, time.time())
            self._starting = None
            if by_name:
                self._launcher = Launcher(self.run_dir, self.queue, self.options,
                                          progress=self._progress(by_name, finish), poll_s=self.poll_seconds,
                                          every=every, skip_finished=False, lock=False)
                self._launcher.run([self.running[key].process.unit for key in by_name.values()])
        except BaseException:
            self.stop(stopped)
            raise
        finally:
            self._launcher = None

    def _progress(self, by_name, finish):
        """The launcher's event callback: a log line each; a job's start resets its clock; an outcome ends
        the key."""
        def progress(event):
            self.log(event_line(event))
            key = by_name[event.name]
            if event.kind == "started":
                self.running[key] = self.running[key]._replace(started=time.time())
            elif event.kind in ENDS:
                job = self.running.pop(key)
                job.process.returncode = returncode(event)
                finish(key, job.process)
        return progress

    def stop(self, stopped=None):
        """Cancels the jobs still running and calls ``stopped`` for each."""
        for key, job in list(self.running.items()):
            job.process.terminate()
            del self.running[key]
            if stopped is not None:
                stopped(key, job.process)
