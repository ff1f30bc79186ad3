"""A real single-node SLURM cluster on localhost for the launcher tests.

`slurm_cluster` (session-scoped fixture) starts munged, slurmctld and slurmd
from a slurm.conf generated in a temporary folder, waits until `sinfo` shows
the node idle, points SLURM_CONF at it, and stops every daemon it started at
the end of the session, also when the start fails half-way. It skips, with
the reason, only where slurm is absent (Debian: `apt-get install slurm-wlm
munge`, which `.ci/run` does).

Each pytest-xdist worker gets a cluster of its own (its own munged socket,
ports, state and node name), so no worker stops daemons another one uses.
Facts of Debian's slurm-wlm 22.05 in a root container without systemd:
munged must run as the `munge` user with /run/munge, /var/log/munge and
/var/lib/munge owned by it; without cgroups the node needs
proctrack/linuxproc, task/none and jobacct_gather/none.
"""
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

MUNGE_DIRS = ("/run/munge", "/var/log/munge", "/var/lib/munge")
MUNGE_KEY = Path("/etc/munge/munge.key")
START_TIMEOUT_S = 60
# How long a node refuses a job whose credential was revoked, and so how long SLURM holds a
# requeued job before it starts it again (default 120 s): short, for the requeue tests.
CRED_EXPIRE_S = 5


def missing_binaries():
    """The slurm/munge programs this helper needs that are not on PATH."""
    names = ("sbatch", "squeue", "scancel", "scontrol", "sinfo", "slurmctld", "slurmd", "munged")
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [name for name in names if shutil.which(name, path=path) is None]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _real_memory_mb():
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            # slurmd refuses to register a node that reports less memory than
            # declared, and it counts a little less than MemTotal.
            return int(line.split()[1]) // 1024 - 256
    raise RuntimeError("/proc/meminfo has no MemTotal line")


def slurm_conf(folder, name, munge_socket, cpus, memory_mb):
    """slurm.conf of a one-node cluster whose files all live in `folder`."""
    host = socket.gethostname()
    return f"""\
ClusterName={name}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket},cred_expire={CRED_EXPIRE_S}
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=120
KillWait=2
SlurmdTimeout=30
InactiveLimit=0
MpiDefault=none
NodeName={name} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={name} Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    """The daemons of one local cluster; `stop()` ends each one it started."""

    def __init__(self, folder, name):
        self.folder = Path(folder)
        self.name = name
        self.conf = self.folder / "slurm.conf"
        self.munge_socket = f"/run/munge/{name}.socket"
        self.processes = []
        self.munged_pid_file = Path(f"/run/munge/{name}.pid")

    def env(self):
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def start(self):
        for sub in ("state", "spool"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self._start_munged()
        self.conf.write_text(slurm_conf(self.folder, self.name, self.munge_socket,
                                        os.cpu_count(), _real_memory_mb()))
        for command in (["slurmctld", "-D", "-c", "-f", str(self.conf)],
                        ["slurmd", "-D", "-N", self.name, "-f", str(self.conf)]):
            log = open(self.folder / f"{command[0]}.out", "w")
            self.processes.append(subprocess.Popen(_sbin(command), stdout=log, stderr=subprocess.STDOUT,
                                                   env=self.env()))
        self._wait_idle()

    def _start_munged(self):
        munge = pwd.getpwnam("munge")
        for folder in MUNGE_DIRS:
            os.makedirs(folder, exist_ok=True)
            os.chown(folder, munge.pw_uid, munge.pw_gid)
        os.chmod("/run/munge", 0o755)
        if not MUNGE_KEY.exists():
            subprocess.run(_sbin(["mungekey", "--create", "--keyfile", str(MUNGE_KEY)]), check=True)
            os.chown(MUNGE_KEY, munge.pw_uid, munge.pw_gid)
            os.chmod(MUNGE_KEY, 0o400)
        # munged daemonises and writes its pid file: that pid is what stop() ends.
        subprocess.run(["runuser", "-u", "munge", "--", *_sbin(["munged"]), f"--socket={self.munge_socket}",
                        f"--pid-file={self.munged_pid_file}", f"--log-file=/var/log/munge/{self.name}.log",
                        f"--seed-file=/var/lib/munge/{self.name}.seed"], check=True)

    def _wait_idle(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        state = ""
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args[0]} exited with {process.returncode}; "
                                       f"see {self.folder}/*.log and *.out")
            run = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env(),
                                 capture_output=True, text=True)
            state = run.stdout.strip() or run.stderr.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(f"the node of {self.conf} is not idle after {START_TIMEOUT_S} s "
                           f"(sinfo: {state!r}); see {self.folder}/slurmctld.log and slurmd.log")

    def stop(self):
        for process in reversed(self.processes):
            process.terminate()
        for process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.munged_pid_file.exists():
            pid = int(self.munged_pid_file.read_text().split()[0])
            os.kill(pid, 15)
            for _ in range(50):
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.1)
        # The log goes beside slurm's logs; the seed file was this cluster's own.
        log = Path(f"/var/log/munge/{self.name}.log")
        if log.exists():
            shutil.move(log, self.folder / "munged.log")
        Path(f"/var/lib/munge/{self.name}.seed").unlink(missing_ok=True)


def requeue(job_id, timeout_s=60):
    """`scontrol requeue` a running job, as a preemption does, and wait until it runs again. SLURM holds
    a requeued job for CRED_EXPIRE_S (a sooner start on the same node is refused: "Job credential
    revoked"), then waits for its next scheduling pass (up to a minute): past the hold, StartTime=now
    starts it, as an admin may."""
    subprocess.run(["scontrol", "requeue", job_id], check=True)
    start, states = time.monotonic(), []
    while not ("PENDING" in states and states[-1] == "RUNNING"):
        if time.monotonic() > start + timeout_s or states[-1:] in (["FAILED"], ["COMPLETED"]):
            raise AssertionError(f"the requeued job {job_id} did not start again (states: {states})")
        if time.monotonic() > start + CRED_EXPIRE_S + 1:
            subprocess.run(["scontrol", "update", f"jobid={job_id}", "StartTime=now"], capture_output=True)
        states.append(subprocess.run(["squeue", "-h", "--states=all", "-o", "%T", f"--jobs={job_id}"],
                                     capture_output=True, text=True).stdout.strip())
        time.sleep(0.2)


def _sbin(command):
    """`command` with its program resolved also in /usr/sbin (not on every root PATH)."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [shutil.which(command[0], path=path) or command[0], *command[1:]]


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    missing = missing_binaries()
    if missing:
        pytest.skip(f"slurm is not installed (no {', '.join(missing)}); "
                    f"on Debian: apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("starting slurmd and munged needs root (the CI container runs as root)")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    cluster = Cluster(tmp_path_factory.mktemp("slurm"), f"posnet{worker}{os.getpid()}")
    saved = os.environ.get("SLURM_CONF")
    try:
        cluster.start()
        os.environ["SLURM_CONF"] = str(cluster.conf)
        yield cluster
    finally:
        cluster.stop()
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
