"""The driver: submit each unit as a job, attach to the jobs of an earlier driver, wait.

`Launcher.run(units)` returns one `Outcome` per unit:

* a unit whose recorded job finished is skipped (its result is read back);
* a unit whose recorded job is still queued or running is attached to, not
  submitted again (the driver died, the jobs did not);
* a unit whose recorded job failed or was cancelled is submitted again; the
  unit resumes from its own checkpoint;
* a unit that waits for others (`Unit.after`) is submitted with
  ``--dependency=afterok`` on their jobs; when one of them fails its job is
  cancelled and it is reported not run.

A job that SLURM requeues (preemption, ``scontrol requeue``) keeps its id:
the driver keeps waiting for it, and the unit resumes when it starts again.
"""
import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .lock import LOCK_FILE, RunLock
from .queues import QUEUES, JobState, submitit_module
from .state import StateFile
from .units import SlurmOptions, job_folder

logger = logging.getLogger(__name__)

FINISHED, FAILED, NOT_RUN = "finished", "failed", "not run"


@dataclass(frozen=True)
class Outcome:
    name: str
    status: str  # FINISHED, FAILED or NOT_RUN
    job_id: Optional[str] = None
    value: Any = None  # what the unit returned (a command: its stdout)
    message: str = ""


@dataclass(frozen=True)
class Event:
    """A progress report: `kind` is submitted, attached, resubmitted, started,
    finished earlier, or an outcome's status."""

    name: str
    kind: str
    job_id: Optional[str] = None
    message: str = ""


def event_line(event):
    """One progress line: "NAME: KIND (job ID): MESSAGE" (a submission's message, its command line, left out)."""
    job = f" (job {event.job_id})" if event.job_id else ""
    message = f": {event.message}" if event.message and event.kind != "submitted" else ""
    return f"{event.name}: {event.kind}{job}{message}"


def log_event(event):
    logger.info("%s", event_line(event))


class Launcher:
    """Runs units as jobs of `queue` ("slurm" or "local") from `run_dir`.

    `retries`: how many times one run submits a failed unit again before it
    reports it failed (a cancelled job is not retried: someone meant it).
    `result_grace_s`: how long a job that SLURM says COMPLETED may take to show
    its result file (shared file systems show other hosts' files late).
    `every()` is called after each poll of the scheduler (a caller's progress line).
    `skip_finished=False` submits again a unit whose recorded job finished: for a
    caller that keeps its own record of finished work (posnet-compare's steps) and
    asks only for what is not done, so that the launcher attaches to live jobs only.
    `lock=False` leaves `run_dir` unlocked, for a caller that holds the lock of a directory above it
    (posnet-compare's --out); otherwise a run holds `run_dir/run.lock` (:mod:`posnet_fairseq.launcher.lock`),
    a second driver on it is refused (:class:`~posnet_fairseq.launcher.lock.RunLocked`), and a dead one's
    lock taken over is reported as an event of the unit "run.lock".
    """

    def __init__(self, run_dir, queue="slurm", options=None, progress: Callable[[Event], None] = log_event,
                 poll_s=5.0, retries=0, result_grace_s=30.0, every: Optional[Callable[[], None]] = None,
                 skip_finished=True, lock=True):
        if queue not in QUEUES:
            raise ValueError(f"launcher {queue!r}: choose one of {sorted(QUEUES)}")
        self.run_dir = run_dir
        self.options = options or SlurmOptions()
        self.queue = QUEUES[queue](self.options)
        self.state = StateFile(run_dir, queue)
        self.progress = progress
        self.poll_s = poll_s
        self.retries = retries
        self.result_grace_s = result_grace_s
        self.every = every
        self.skip_finished = skip_finished
        self.lock = lock

    def run(self, units):
        units = list(units)
        given, units = [u.name for u in units], _checked(units)
        if not self.lock:
            return self._run(given, units)
        with RunLock(self.run_dir) as lock:
            if lock.notice:
                self.progress(Event(LOCK_FILE, "notice", None, lock.notice))
            return self._run(given, units)

    def _run(self, given, units):
        by_name = {u.name: u for u in units}
        outcomes = {}
        live = {}  # unit name -> job id of a job that may still produce a result
        self._last_state = {}
        self._attach(units, outcomes, live)
        retried = dict.fromkeys(by_name, 0)
        ended_at = {}
        while True:
            self._submit_ready(units, outcomes, live)
            if not live:
                return {name: outcomes[name] for name in given}
            time.sleep(self.poll_s)
            if self.every is not None:
                self.every()
            states = self.queue.states(sorted(live.values()))
            for name, job_id in list(live.items()):
                state = states.get(job_id)
                if state is not None and state.active:
                    self._note(name, job_id, state)
                    continue
                if (state is not None and state.state == "COMPLETED"
                        and not self._result(by_name[name], job_id).exists()
                        and time.monotonic() - ended_at.setdefault(name, time.monotonic()) < self.result_grace_s):
                    continue
                del live[name]
                outcome = self._ended(by_name[name], job_id, state)
                cancelled = state is not None and state.state == "CANCELLED"
                if outcome.status == FAILED and not cancelled and retried[name] < self.retries:
                    retried[name] += 1
                    self.progress(Event(name, "resubmitted", job_id, f"retry {retried[name]}: {outcome.message}"))
                    self._withdraw_dependents(name, units, live)
                    continue
                outcomes[name] = outcome
                self._report(outcome)

    def _attach(self, units, outcomes, live):
        """Sorts the units an earlier driver submitted: attach, skip, or submit again."""
        recorded = {u.name: self.state.job_id(u.name) for u in units if self.state.job_id(u.name)}
        states = self.queue.states(sorted(set(recorded.values())))
        for name, job_id in recorded.items():
            state = states.get(job_id)
            if state is not None and state.active:
                live[name] = job_id
                self._last_state[name] = state.state
                self.progress(Event(name, "attached", job_id, state.state))
                continue
            outcome = self._ended(next(u for u in units if u.name == name), job_id, state)
            if outcome.status == FINISHED and self.skip_finished:
                outcomes[name] = outcome
                self.progress(Event(name, "finished earlier", job_id))
            else:
                said = "finished; its caller asks for it again" if outcome.status == FINISHED else outcome.message
                self.progress(Event(name, "resubmitted", job_id, f"its job {job_id} {said}"))

    def _note(self, name, job_id, state):
        if state.state != self._last_state.get(name):
            self._last_state[name] = state.state
            if state.state == "RUNNING":
                self.progress(Event(name, "started", job_id))

    def _withdraw_dependents(self, name, units, live):
        """Cancels the queued jobs that wait for `name`'s failed job (and those waiting
        for them): afterok on it can never hold. They go again after its new job."""
        waiting = {name}
        for unit in units:  # _checked's order puts dependents after what they wait for
            if unit.name in live and waiting & set(unit.after):
                waiting.add(unit.name)
                job_id = live.pop(unit.name)
                self.queue.cancel(job_id)
                self.progress(Event(unit.name, "resubmitted", job_id, f"after the new job of {name}"))

    def _submit_ready(self, units, outcomes, live):
        """Submits every unit that can go now; marks not run those whose dependencies failed."""
        progressed = True
        while progressed:
            progressed = False
            for unit in units:
                if unit.name in outcomes:
                    continue
                failed = [d for d in unit.after if d in outcomes and outcomes[d].status != FINISHED]
                if failed:
                    self._not_run(unit, failed, outcomes, live)
                    progressed = True
                    continue
                if unit.name in live:
                    continue
                ready = all(d in outcomes or (self.queue.queues_dependents and d in live) for d in unit.after)
                if ready:
                    dependency_ids = [live[d] for d in unit.after if d in live]
                    job_id = self.queue.submit(unit, self.run_dir, dependency_ids)
                    self.state.record(unit.name, job_id)
                    live[unit.name] = job_id
                    self.progress(Event(unit.name, "submitted", job_id, unit.describe()))
                    progressed = True

    def _not_run(self, unit, failed, outcomes, live):
        job_id = live.pop(unit.name, None)
        if job_id is not None:
            # afterok can never be satisfied now; SLURM would keep the job pending.
            self.queue.cancel(job_id)
        outcomes[unit.name] = Outcome(unit.name, NOT_RUN, job_id,
                                      message=f"{', '.join(failed)} did not finish; a re-run submits it")
        self._report(outcomes[unit.name])

    def _report(self, outcome):
        self.progress(Event(outcome.name, outcome.status, outcome.job_id, outcome.message))

    def _paths(self, unit, job_id):
        return submitit_module().core.utils.JobPaths(job_folder(self.run_dir, unit), job_id=job_id, task_id=0)

    def _result(self, unit, job_id):
        return self._paths(unit, job_id).result_pickle

    def _ended(self, unit, job_id, state: Optional[JobState]):
        """The outcome of a job the scheduler lists as ended (`state`) or no longer lists (None)."""
        paths = self._paths(unit, job_id)
        said = "is no longer listed by the scheduler" if state is None else f"ended {state.state}"
        if paths.result_pickle.exists():
            job = submitit_module().Job(paths.folder, job_id)
            error = job.exception()
            if error is None:
                return Outcome(unit.name, FINISHED, job_id, job.result())
            what = f"the unit failed: {_error_lines(str(error))}"
        else:
            what = "it left no result (cancelled, killed or lost)"
        log = paths.stderr
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
        where = f"; its log {log}" + (": " + " | ".join(tail) if tail else "") if log.exists() else ""
        return Outcome(unit.name, FAILED, job_id,
                       message=f"{said}; {what}{where}; a re-run submits it again (it resumes)")


def _error_lines(report):
    """The exception lines of submitit's error report (between its dashed lines),
    e.g. "subprocess.CalledProcessError: Command [...] returned non-zero exit status 3."."""
    trace = report.split("-" * 22)[1] if report.count("-" * 22) >= 2 else report
    lines = [line for line in trace.splitlines() if line and not line[0].isspace()
             and not line.startswith(("Traceback", "The above exception", "During handling"))]
    # A command's whole argument list is in the unit's description already.
    return re.sub(r"Command '\[.*?\]' returned", "its command returned", " | ".join(lines))


def _checked(units):
    """The units in dependency order (each after those it waits for), after checking
    that names are unique and dependencies known and acyclic."""
    units = list(units)
    names = [u.name for u in units]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"units named twice: {duplicates}")
    for unit in units:
        unknown = [d for d in unit.after if d not in names]
        if unknown:
            raise ValueError(f"unit {unit.name!r} waits for unknown units {unknown}")
    ordered, waiting = [], list(units)
    while waiting:
        done = {u.name for u in ordered}
        ready = [u for u in waiting if set(u.after) <= done]
        if not ready:
            raise ValueError(f"units wait for each other in a cycle: {sorted(u.name for u in waiting)}")
        ordered += ready
        waiting = [u for u in waiting if u.name not in {r.name for r in ready}]
    return ordered
