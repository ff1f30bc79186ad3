"""Train every architecture of a ``posnet-compare`` run with the same recipe and budget.

Each model is a ``fairseq-train`` subprocess, one per slot of the run's
:class:`~posnet_fairseq.compare.devices.Plan` at a time (a CPU thread or a
GPU); its log is ``OUT/checkpoints/ARCH.train.log`` and its
checkpoints ``OUT/checkpoints/ARCH/``. After training, the last checkpoints
are averaged (``posnet-average-checkpoints``) into ``checkpoint_avg.pt`` and
``done.json`` records the outcome, so a second run skips the model. A model
without ``done.json`` but with ``checkpoint_last.pt`` resumes from it
(fairseq's own resume: optimiser, scheduler and data iterator included);
checkpoints are saved every ``interval`` updates, so at most that much work
is lost to an interruption.

While models train, a progress line for the whole run (models done, each
running model's epoch and update, ETA) is printed every ``progress_every``
seconds.
"""
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

from ..checkpoint_averaging import write_average
from ..plugin import PLUGIN_DIR, subprocess_env

_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(e|epochs?|u|updates?|m|min|minutes?)\s*$")
_INNER = re.compile(r"epoch (\d+):\s+(\d+) / (\d+) .*num_updates=(\d+)")
_VALID = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \| INFO \| valid \| epoch (\d+) \| valid on '[^']*' subset"
                    r" \| loss ([\d.]+) .*\| num_updates (\d+)")
_UPDATES = re.compile(r"\| (?:train|valid) \| epoch (\d+) \|.*\| num_updates (\d+)")
_SAVED = re.compile(r"Saved checkpoint (\S+) \(epoch \d+ @ (\d+) updates")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \|")
# Written into the training log before each fairseq-train process starts.
START_MARK = "posnet-compare: fairseq-train starts at "


@dataclass(frozen=True)
class Budget:
    """The same training budget for every model: epochs, updates or minutes of training time."""

    amount: float
    unit: str  # "epochs" | "updates" | "minutes"

    @classmethod
    def parse(cls, text):
        match = _BUDGET.match(text)
        if not match or float(match.group(1)) <= 0:
            raise ValueError(f"--budget {text!r}: expected a positive number with a unit: "
                             f"5e (epochs), 2000u (updates) or 20m (minutes)")
        unit = {"e": "epochs", "u": "updates", "m": "minutes"}[match.group(2)[0]]
        amount = float(match.group(1))
        if unit != "minutes" and amount != int(amount):
            raise ValueError(f"--budget {text!r}: {unit} must be a whole number")
        return cls(amount, unit)

    def __str__(self):
        return f"{self.amount:g} {self.unit}"

    def fairseq_flags(self):
        if self.unit == "epochs":
            return ["--max-epoch", str(int(self.amount))]
        if self.unit == "updates":
            return ["--max-update", str(int(self.amount))]
        # fairseq counts the training time of earlier runs (stored in the checkpoint) too.
        return ["--stop-time-hours", repr(self.amount / 60)]

    def fraction(self, epoch, step, steps_per_epoch, updates, seconds):
        """How much of the budget a model has used (0..1)."""
        if self.unit == "epochs":
            done = epoch - 1 + step / max(steps_per_epoch, 1)
        elif self.unit == "updates":
            done = updates
        else:
            done = seconds / 60
        return min(1.0, done / self.amount)


@dataclass
class Recipe:
    """What every model shares: seed, optimiser, schedule, batch, checkpoints and averaging."""

    seed: int = 1
    lr: float = 0.002
    warmup_updates: int = 200
    max_tokens: int = 2048
    dropout: float = 0.1
    interval: int = 50  # updates between validations and checkpoints
    average: int = 3  # last checkpoints averaged

    def fairseq_flags(self, budget):
        return [
            "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", repr(self.lr),
            "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(self.warmup_updates),
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
            "--dropout", repr(self.dropout), "--max-tokens", str(self.max_tokens), "--seed", str(self.seed),
            "--num-workers", "0", "--log-format", "simple", "--log-interval", "10",
            "--validate-interval-updates", str(self.interval), "--save-interval-updates", str(self.interval),
            "--keep-interval-updates", str(self.average), "--keep-last-epochs", str(self.average),
            # fairseq drops a last batch whose size is not a multiple of this (default 8): a small
            # validation set would lose sentences, one of fewer than 8 sentences all of them.
            "--required-batch-size-multiple", "1",
            "--skip-invalid-size-inputs-valid-test", *budget.fairseq_flags(),
        ]


def train_command(data_bin, save_dir, arch, flags, recipe, budget, device_flags=()):
    return [sys.executable, "-m", "posnet_fairseq.cli.fairseq_wrappers", "train", data_bin, "--user-dir", PLUGIN_DIR,
            "--arch", arch,
            "--save-dir", save_dir, *recipe.fairseq_flags(budget), *device_flags, *flags]


def _latest(log_path):
    """(epoch, step, steps per epoch, updates) from the last progress lines of a training log."""
    epoch, step, steps, updates = 1, 0, 1, 0
    if os.path.exists(log_path):
        with open(log_path, errors="replace") as f:
            for line in f:
                m = _INNER.search(line)
                if m:
                    epoch, step, steps, updates = (int(g) for g in m.groups())
                    continue
                m = _UPDATES.search(line)
                if m:
                    epoch, updates = int(m.group(1)), int(m.group(2))
    return epoch, step, steps, updates


def finished_in_log(log_path):
    """Whether the last fairseq-train process of a log ran to the end of its budget."""
    finished = False
    if os.path.exists(log_path):
        with open(log_path, errors="replace") as f:
            for line in f:
                if line.startswith(START_MARK):
                    finished = False
                elif "| fairseq_cli.train | done training in " in line:
                    finished = True
    return finished


def saved_checkpoints(log_path):
    """[(updates, file name)] of every checkpoint fairseq saved, in order (fairseq logs the first
    file of each save; the others, checkpoint_last.pt among them, are copies of it)."""
    saves = []
    if os.path.exists(log_path):
        with open(log_path, errors="replace") as f:
            for line in f:
                m = _SAVED.search(line)
                if m:
                    saves.append((int(m.group(2)), os.path.basename(m.group(1))))
    return saves


def valid_curve(log_path):
    """[(updates, training seconds, valid loss)] from a training log. Seconds count from the first
    "begin training epoch" of each fairseq-train process (start-up excluded); the time between an
    interruption and the resumed run is left out."""
    import datetime

    def seconds(stamp):
        return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timestamp()

    points, offset, start, last = [], 0.0, None, None
    with open(log_path, errors="replace") as f:
        for line in f:
            if line.startswith(START_MARK):
                if start is not None and last is not None:
                    offset += last - start
                start, last = None, None
                continue
            m = _STAMP.match(line)
            if m and start is None and "| fairseq.trainer | begin training epoch" in line:
                start = seconds(m.group(1))
            if m and start is not None:
                last = seconds(m.group(1))
            m = _VALID.match(line)
            if m and start is not None:
                points.append((int(m.group(4)), offset + seconds(m.group(1)) - start, float(m.group(3))))
    return points


def averaged_files(save_dir, log_path, budget, count):
    """The checkpoints to average: the last ``count`` epoch checkpoints for an epoch budget, else
    the last ``count`` saves (every ``interval`` updates and at the end of each epoch and of training)."""
    if budget.unit == "epochs":
        found = sorted((int(m.group(1)), name) for name in os.listdir(save_dir)
                       for m in [re.fullmatch(r"checkpoint(\d+)\.pt", name)] if m)
        return [os.path.join(save_dir, name) for _, name in found[-count:]]
    saves = saved_checkpoints(log_path)
    chosen, seen = [], set()
    for i, (updates, name) in enumerate(reversed(saves)):
        if updates in seen:
            continue
        if i == 0:
            name = "checkpoint_last.pt"  # always a copy of the latest save
        elif name.startswith(("checkpoint_best", "checkpoint_last")):
            continue  # overwritten by later saves
        path = os.path.join(save_dir, name)
        if os.path.exists(path):
            chosen.append(path)
            seen.add(updates)
        if len(chosen) == count:
            break
    return chosen[::-1]


class Trainer:
    """Runs the trainings of one ``posnet-compare`` run; see the module docstring."""

    def __init__(self, out_dir, data_bin, budget, recipe, plan, log, progress_every=30):
        self.dir = os.path.join(out_dir, "checkpoints")
        self.data_bin, self.budget, self.recipe, self.plan = data_bin, budget, recipe, plan
        self.log, self.progress_every = log, progress_every
        self.running = {}  # arch -> (Popen, log file, start time, slot)
        os.makedirs(self.dir, exist_ok=True)

    def save_dir(self, arch):
        return os.path.join(self.dir, arch)

    def log_path(self, arch):
        return os.path.join(self.dir, f"{arch}.train.log")

    def done_path(self, arch):
        return os.path.join(self.save_dir(arch), "done.json")

    def outcome(self, arch):
        """done.json of a finished model, or None."""
        if not os.path.exists(self.done_path(arch)):
            return None
        with open(self.done_path(arch)) as f:
            return json.load(f)

    def _start(self, arch, flags, slot):
        save_dir = self.save_dir(arch)
        pid_path = os.path.join(save_dir, "train.pid")
        if os.path.exists(pid_path):
            with open(pid_path) as f:
                pid = int(f.read())
            try:
                os.kill(pid, 0)
            except OSError:
                pass
            else:
                raise RuntimeError(f"{arch} is still training in process {pid} (an earlier posnet-compare "
                                   f"that did not stop it); wait for it or kill it, then re-run")
        os.makedirs(save_dir, exist_ok=True)
        last = os.path.join(save_dir, "checkpoint_last.pt")
        if os.path.exists(last):
            epoch, _, _, updates = _latest(self.log_path(arch))
            self.log(f"train: resuming {arch} from {last} (epoch {epoch}, update {updates} in its log)")
        else:
            self.log(f"train: starting {arch} ({self.budget})")
        log_file = open(self.log_path(arch), "a")
        log_file.write(f"{START_MARK}{time.time():.3f}\n")
        log_file.flush()
        env = subprocess_env(**self.plan.slots[slot])
        command = train_command(self.data_bin, save_dir, arch, flags, self.recipe, self.budget,
                                self.plan.train_flags())
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env)
        with open(pid_path, "w") as f:
            f.write(str(process.pid))
        self.running[arch] = (process, log_file, time.time(), slot)

    def _finish(self, arch, process, log_file):
        """done.json for a finished training (``process`` None: it finished in an earlier run)."""
        if process is not None:
            log_file.close()
            os.remove(os.path.join(self.save_dir(arch), "train.pid"))
        if process is not None and process.returncode != 0:
            with open(self.log_path(arch), errors="replace") as f:
                tail = f.readlines()[-15:]
            self.log(f"train: {arch} FAILED (exit {process.returncode}); end of {self.log_path(arch)}:\n"
                     + "".join("    " + line for line in tail))
            return {"arch": arch, "failed": f"fairseq-train exit {process.returncode}: "
                    + next((line.strip() for line in reversed(tail) if "Error" in line), tail[-1].strip() if tail else "")}
        files = averaged_files(self.save_dir(arch), self.log_path(arch), self.budget, self.recipe.average)
        if not files:
            raise RuntimeError(f"{arch}: fairseq-train saved no checkpoint (see {self.log_path(arch)})")
        checkpoint = os.path.join(self.save_dir(arch), "checkpoint_avg.pt")
        write_average(files, checkpoint)
        epoch, _, _, updates = _latest(self.log_path(arch))
        outcome = {"arch": arch, "checkpoint": checkpoint, "averaged": [os.path.basename(f) for f in files],
                   "epochs": epoch, "updates": updates, "budget": str(self.budget)}
        with open(self.done_path(arch) + ".tmp", "w") as f:
            json.dump(outcome, f, indent=2)
        os.replace(self.done_path(arch) + ".tmp", self.done_path(arch))
        self.log(f"train: {arch} finished ({updates} updates, epoch {epoch}; averaged "
                 f"{', '.join(outcome['averaged'])})")
        return outcome

    def _progress(self, archs, finished, started_at, done_before):
        parts, fractions = [], []
        for arch in archs:
            if arch in finished:
                fractions.append(1.0)
            elif arch in self.running:
                epoch, step, steps, updates = _latest(self.log_path(arch))
                frac = self.budget.fraction(epoch, step, steps, updates, time.time() - self.running[arch][2])
                fractions.append(frac)
                parts.append(f"{arch} epoch {epoch} update {updates}")
            else:
                fractions.append(0.0)
        # ETA from the work done in this run (models skipped as finished earlier do not count).
        todo = len(archs) - done_before
        now_done = sum(fractions) - done_before
        elapsed = time.time() - started_at
        eta = f"ETA {elapsed * (todo - now_done) / now_done / 60:.0f} min" if now_done > 0.02 else "ETA -"
        self.log(f"progress: model {len(finished)}/{len(archs)} finished; running: "
                 f"{', '.join(parts) or 'none'}; {eta}")

    def stop(self):
        """Terminates running trainings (their checkpoints stay for the resume)."""
        for arch, (process, log_file, _, _) in list(self.running.items()):
            process.terminate()
            process.wait()
            log_file.close()
            os.remove(os.path.join(self.save_dir(arch), "train.pid"))
            self.log(f"train: stopped {arch}; a re-run resumes it")
        self.running.clear()

    def run(self, archs, flags):
        """Trains ``archs`` (``flags[arch]``: its fairseq flags); returns {arch: outcome}."""
        outcomes = {}
        for arch in archs:
            outcome = self.outcome(arch)
            if outcome is not None:
                self.log(f"train: skipped {arch}, finished earlier ({self.done_path(arch)})")
                outcomes[arch] = outcome
        for arch in archs:
            if arch not in outcomes and finished_in_log(self.log_path(arch)):
                # Interrupted after training, before averaging: resuming would train one more update.
                self.log(f"train: {arch} finished training earlier; averaging its checkpoints")
                outcomes[arch] = self._finish(arch, None, None)
        done_before = len(outcomes)
        queue = [a for a in archs if a not in outcomes]
        started_at = last_progress = time.time()
        try:
            while queue or self.running:
                free = sorted(set(range(self.plan.jobs)) - {entry[3] for entry in self.running.values()})
                while queue and free:
                    arch = queue.pop(0)
                    self._start(arch, flags[arch], free.pop(0))
                for arch, (process, log_file, _, _) in list(self.running.items()):
                    if process.poll() is not None:
                        del self.running[arch]
                        outcomes[arch] = self._finish(arch, process, log_file)
                if time.time() - last_progress >= self.progress_every and self.running:
                    self._progress(archs, outcomes, started_at, done_before)
                    last_progress = time.time()
                time.sleep(0.5)
        except BaseException:  # KeyboardInterrupt, or SIGTERM turned into one by posnet-compare
            self.stop()
            raise
        return outcomes
