"""One ``posnet-compare`` run at a time on an ``--out``: the lock of :mod:`posnet_fairseq.launcher.lock` on it.

Two runs on one ``--out`` rewrite each other's data-bin, checkpoints and
steps (issue 49: the second one's data preparation failed with a traceback
while the first was reporting on data it had not trained on). The run takes
the lock before any step, with ``--launcher local`` and ``slurm`` alike; a
second one is refused in one line naming the holder, and a run that takes over
the lock of a killed one says so in its log.
"""
import contextlib

from ..launcher.lock import RunLock, RunLocked


@contextlib.contextmanager
def held(p, out, log):
    """Holds the lock of ``out`` while the ``with`` block runs; ``p.error`` refuses the run when another holds
    it; ``log`` gets the notice of a lock taken over."""
    lock = RunLock(out, "posnet-compare")
    try:
        notice = lock.acquire()
    except RunLocked as err:
        p.error(f"--out {out} {err}, or give another --out")
    if notice:
        log(f"lock: {notice}")
    try:
        yield
    finally:
        lock.release()
