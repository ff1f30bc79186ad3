"""One run at a time in a run directory (issue 49, item 1; posnet_fairseq/launcher/lock.py): a second run is
refused in one line naming the holder (pid, host, start time); a lock left by a killed run is taken over and
the run says so; the launcher's driver and posnet-compare (--launcher local; slurm: tests/test_slurm_runs.py)
take it."""
import os
import re
import signal
import socket
import subprocess
import sys

import pytest

from posnet_fairseq.cli import compare
from posnet_fairseq.launcher import LOCK_FILE, Launcher, RunLock, RunLocked, Unit
from test_compare import SMALL_SYNTHETIC

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLD = ("import sys, time\n"
        "from posnet_fairseq.launcher.lock import RunLock\n"
        "lock = RunLock(sys.argv[1], sys.argv[2])\n"
        "lock.acquire()\n"
        "print('locked', flush=True)\n"
        "time.sleep(600)\n")
STARTED = r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


@pytest.fixture
def holder():
    """Starts a process that takes the lock of a directory as ``tool`` and keeps it until killed."""
    started = []

    def start(directory, tool):
        process = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), tool], stdout=subprocess.PIPE,
                                   text=True, env=dict(os.environ, PYTHONPATH=REPO))
        started.append(process)
        assert process.stdout.readline() == "locked\n"
        return process
    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def _kill_9(process):
    process.send_signal(signal.SIGKILL)
    process.wait()


def test_a_held_lock_names_its_holder_and_a_dead_ones_is_taken_over(tmp_path, holder):
    process = holder(tmp_path / "run", "some-tool")
    with pytest.raises(RunLocked) as refused:
        RunLock(tmp_path / "run").acquire()
    said = str(refused.value)
    assert re.fullmatch(rf"is in use by some-tool pid {process.pid} on host {re.escape(socket.gethostname())}, "
                        rf"{STARTED} \({re.escape(str(tmp_path / 'run' / LOCK_FILE))}\); wait for that run to end or "
                        rf"stop it \(kill {process.pid} on {re.escape(socket.gethostname())}\)", said), said
    _kill_9(process)
    lock = RunLock(tmp_path / "run", "next-tool")
    notice = lock.acquire()
    assert notice.startswith(f"took over the lock of {tmp_path / 'run'} from some-tool pid {process.pid} on host ")
    assert "which ended without releasing it" in notice
    with pytest.raises(RunLocked, match=f"in use by next-tool pid {os.getpid()} "):
        RunLock(tmp_path / "run").acquire()  # another open file of the same process is another run
    lock.release()
    with RunLock(tmp_path / "run") as again:  # released cleanly: nothing to take over
        assert again.notice is None


def test_a_file_system_that_cannot_lock_is_said_and_the_run_goes_on(tmp_path, monkeypatch):
    import errno
    import fcntl

    def no_locks(handle, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    monkeypatch.setattr(fcntl, "flock", no_locks)
    with RunLock(tmp_path / "run") as lock:
        assert lock.notice == (f"{tmp_path / 'run'} cannot be locked ({os.strerror(errno.ENOLCK)}): a second run "
                               "on it would not be refused; start only one")


def test_the_launcher_driver_takes_the_lock_of_its_run_directory(tmp_path, holder):
    run = tmp_path / "run"
    unit = Unit("one", command=(sys.executable, "-c", "print('one done')"))
    process = holder(run, "posnet-recipe")
    with pytest.raises(RunLocked, match=f"in use by posnet-recipe pid {process.pid} "):
        Launcher(run, "local", poll_s=0.1).run([unit])
    assert not (run / "jobs").exists()  # refused before anything was submitted
    _kill_9(process)
    events = []
    outcome = Launcher(run, "local", progress=events.append, poll_s=0.1).run([unit])["one"]
    assert outcome.value == "one done"
    notice = next(e for e in events if e.name == LOCK_FILE)
    assert notice.kind == "notice" and f"from posnet-recipe pid {process.pid} on host" in notice.message


def test_a_second_compare_on_the_same_out_is_refused_and_a_killed_ones_lock_taken_over(tmp_path, holder, capsys):
    out = tmp_path / "run"
    argv = ["--archs", "posnet_transformer_tiny", "--out", str(out), *SMALL_SYNTHETIC]
    argv[argv.index("--jobs") + 1] = "1"
    process = holder(out, "posnet-compare")
    with pytest.raises(SystemExit) as refused:
        compare.main(argv)
    assert refused.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.fullmatch(rf"posnet-compare: error: --out {re.escape(str(out))} is in use by posnet-compare pid "
                        rf"{process.pid} on host \S+, {STARTED} \(.*\); wait for that run to end or stop it "
                        rf"\(kill {process.pid} on \S+\), or give another --out", error), error
    assert sorted(os.listdir(out)) == ["compare.log", LOCK_FILE]  # nothing prepared
    _kill_9(process)
    assert compare.main(argv) == 0
    log = (out / "compare.log").read_text()
    assert f"lock: took over the lock of {out} from posnet-compare pid {process.pid} on host " in log
    assert (out / LOCK_FILE).read_text() == ""  # released at the end: the next run takes nothing over
