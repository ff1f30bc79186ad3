"""The clock of a ``posnet-compare`` run's ETA (:class:`RunClock`)."""
import time


class RunClock:
    """The seconds a run has trained, for its ETA: wall time less the stalls of its poll loop when its jobs stop
    with it. A local pool's loop that has not polled for ``STALL`` seconds was stopped together with its
    fairseq-train children (SIGSTOP of the process group, a suspended machine), which trained nothing meanwhile:
    counted as training, a 26-minute pause of run (b) of docs/compare.md made its ETA read 553 minutes. Cluster
    jobs train on while the runner is stopped: there every second counts."""

    STALL = 300.0  # far above any poll interval and any finished model's averaging

    def __init__(self, jobs_stop_with_runner, now=time.time):
        self.jobs_stop_with_runner, self.now = jobs_stop_with_runner, now
        self.started = self.last_poll = now()
        self.stalled = 0.0

    def poll(self):
        now = self.now()
        if self.jobs_stop_with_runner and now - self.last_poll > self.STALL:
            self.stalled += now - self.last_poll
        self.last_poll = now

    def elapsed(self):
        return self.now() - self.started - self.stalled
