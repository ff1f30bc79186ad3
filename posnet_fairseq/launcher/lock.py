"""One run at a time in a run directory: ``DIR/run.lock``.

A run holds an exclusive ``flock`` on ``DIR/run.lock`` for as long as it uses
the directory, and writes into the file who it is: the tool, its process id,
its host and its start time. A second run on the directory is refused with
that holder named (:class:`RunLocked`). The kernel drops the ``flock`` of a
process that dies however it dies (kill -9, a lost node): the next run takes
the lock, finds the dead run's name still in the file (a run that ends cleanly
empties it) and says that it took over. ``flock`` on NFS is a lock of the
server, so a run on another login node sees it too. A file system that cannot
lock at all (``ENOLCK``, ``EOPNOTSUPP``, ...) is said once; the run goes on
unlocked.

The file is never removed: a run that removed it while another opened it
would let a third create a new file and lock that one beside the second.
"""
import datetime
import errno
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Optional

LOCK_FILE = "run.lock"
# How long a refused run waits for the holder's name: the holder writes it right after taking the lock.
_NAME_WAIT_S = 2.0
_UNLOCKABLE = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a run directory's lock."""

    tool: str
    pid: int
    host: str
    started: float  # time.time() when it took the lock

    def describe(self):
        when = datetime.datetime.fromtimestamp(self.started, datetime.timezone.utc)
        return f"{self.tool} pid {self.pid} on host {self.host}, started {when:%Y-%m-%d %H:%M:%S} UTC"

    @classmethod
    def parse(cls, text):
        """The holder a lock file names, or None for an empty or unreadable one."""
        try:
            fields = json.loads(text)
            return cls(str(fields["tool"]), int(fields["pid"]), str(fields["host"]), float(fields["started"]))
        except (ValueError, KeyError, TypeError):
            return None


class RunLocked(RuntimeError):
    """The run directory is in use by ``holder`` (None: a run that has not written its name yet)."""

    def __init__(self, path, holder: Optional[Holder]):
        self.path, self.holder = path, holder
        who = holder.describe() if holder else "a run that has not written its name into it yet"
        stop = f"kill {holder.pid} on {holder.host}" if holder else f"see fuser {path}"
        super().__init__(f"is in use by {who} ({path}); wait for that run to end or stop it ({stop})")


class RunLock:
    """The lock of ``run_dir`` for a run of ``tool``: :meth:`acquire`, then :meth:`release` (or ``with``)."""

    def __init__(self, run_dir, tool=None):
        self.path = os.path.join(os.fspath(run_dir), LOCK_FILE)
        self.tool = tool or os.path.basename(sys.argv[0]) or "python"
        self._file = None

    def acquire(self) -> Optional[str]:
        """Takes the lock; returns a notice for the run's log (a dead run's lock taken over, or a file system
        that cannot lock), else None. Raises :class:`RunLocked` while another run holds it."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        handle = open(self.path, "a+")  # not "w": that would empty the holder's name before the lock is tried
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            handle.close()
            if err.errno in _UNLOCKABLE:
                return (f"{os.path.dirname(self.path)} cannot be locked ({err.strerror}): a second run on it "
                        "would not be refused; start only one")
            if err.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            raise RunLocked(self.path, self._holder()) from None
        handle.seek(0)
        dead = Holder.parse(handle.read())
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"tool": self.tool, "pid": os.getpid(), "host": socket.gethostname(),
                                 "started": time.time()}))
        handle.flush()
        os.fsync(handle.fileno())
        self._file = handle
        if dead is None:
            return None
        return (f"took over the lock of {os.path.dirname(self.path)} from {dead.describe()}, which ended without "
                "releasing it (killed, or its machine went down); its finished work is kept and the rest resumed")

    def _holder(self):
        deadline = time.monotonic() + _NAME_WAIT_S
        while True:
            with open(self.path) as f:
                holder = Holder.parse(f.read())
            if holder is not None or time.monotonic() > deadline:
                return holder
            time.sleep(0.05)

    def release(self):
        """Empties the file (the run ended cleanly: nothing to take over) and drops the lock."""
        if self._file is None:
            return
        handle, self._file = self._file, None
        handle.truncate(0)
        handle.flush()
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()

    def __enter__(self):
        self.notice = self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
