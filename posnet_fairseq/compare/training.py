"""Train every architecture of a ``posnet-compare`` run with the same recipe and budget.

Each model is a ``fairseq-train`` subprocess, one per slot of the run's
:class:`~posnet_fairseq.compare.devices.Plan` at a time (a CPU thread or a
GPU; :mod:`posnet_fairseq.process_pool`); its log is
``OUT/checkpoints/ARCH.train.log`` and its checkpoints ``OUT/checkpoints/ARCH/``.
After training, the last checkpoints are averaged
(``posnet-average-checkpoints``) into ``checkpoint_avg.pt``, and the step
``train/ARCH`` (:mod:`posnet_fairseq.compare.steps`) records it (its
:class:`~posnet_fairseq.compare.records.TrainOutcome`), so that a second run
skips the model while that record holds its settings and the file is intact
(a damaged or deleted average is made again); a training taken from another
run or shared with another model is recorded alike. A model that did not finish but has
``checkpoint_last.pt`` resumes from it (fairseq's own resume: optimiser,
scheduler and data iterator included); checkpoints are saved every
``interval`` updates, so at most that much work is lost to an interruption.
A model whose ``checkpoint_last.pt`` is gone starts again from update 0,
says so, and starts a new log (its validation curve and time start again).
With ``--delete-checkpoints`` a compared model's checkpoints are removed
after the report (:meth:`Trainer.delete_checkpoints`); its step stays
finished, and a later step that must read them is refused
(:func:`posnet_fairseq.compare.steps.require_checkpoints`).

While models train, a progress line for the whole run (models done, each
running model's epoch and update, ETA) is printed every ``progress_every``
seconds.
"""
import functools
import math
import os
import re
import shutil
import subprocess
import time
from dataclasses import replace

from .. import fairseq_log
from ..checkpoint_averaging import best_copies, write_average
from ..plugin import subprocess_env
from . import restart, seeds, wrapper_lines
from .model_flags import architecture
from .records import TrainOutcome
from .recipe import step_settings, train_command
from .run_clock import RunClock
from .steps import deleted

AVERAGE = "checkpoint_avg.pt"


# fairseq-preprocess writes its log, which names the paths it ran with, into the data-bin: data-bins of the
# same data differ there only.
DATA_LOG = ("preprocess.log",)


def _link(source, target):
    """``target`` becomes ``source``'s file (a hard link, or a copy where links are not possible)."""
    if os.path.lexists(target):
        os.remove(target)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def averaged_files(save_dir, log_path, budget, count):
    """The checkpoints to average: with --budget converge the ``count`` best (fairseq's
    --keep-best-checkpoints copies, lowest validation loss first); the last ``count`` epoch checkpoints for
    an epoch budget, else the last ``count`` saves (every ``interval`` updates and at the end of each epoch
    and of training)."""
    if budget.patience:
        return best_copies(save_dir)[:count]
    if budget.unit == "epochs":
        found = sorted((int(m.group(1)), name) for name in os.listdir(save_dir)
                       for m in [re.fullmatch(r"checkpoint(\d+)\.pt", name)] if m)
        return [os.path.join(save_dir, name) for _, name in found[-count:]]
    saves = fairseq_log.saved_checkpoints(log_path)
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
    """Runs the trainings of one ``posnet-compare`` run (``steps``: its
    :class:`~posnet_fairseq.compare.steps.Steps`); see the module docstring."""

    def __init__(self, steps, data_bin, budget, recipe, plan, log, progress_every=30, split=None, reuse_from=(),
                 seed_offsets=None):
        """``split(name)``: the (architecture, seed) a model's name trains (default: the name itself with the
        recipe's seed; :func:`posnet_fairseq.compare.seeds.split` names one model per seed); ``reuse_from``:
        the Steps of earlier runs whose finished trainings this run takes (:meth:`_reuse`); ``seed_offsets``:
        --seed-offset, {architecture of --archs: N}, whose models train with their seed + N."""
        self.split = split or (lambda name: (name, recipe.seed))
        self.seed_offsets = seed_offsets or {}
        self.steps, self.reuse_from = steps, list(reuse_from)
        self.dir = os.path.join(steps.out, "checkpoints")
        self.data_bin, self.budget, self.recipe, self.plan = data_bin, budget, recipe, plan
        self.log, self.progress_every = log, progress_every
        self.pool = plan.pool("train", log)  # local processes, or SLURM jobs (--launcher slurm)
        self.log_files = {}  # arch -> its open training log
        self.done_before = {}  # arch -> its training before this run, in the budget's unit (inf: finished)
        self.same_data = {}  # a --reuse-from run's directory -> whether its data is this run's (_same_data)
        os.makedirs(self.dir, exist_ok=True)

    def save_dir(self, arch):
        return os.path.join(self.dir, arch)

    def log_path(self, arch):
        return os.path.join(self.dir, f"{arch}.train.log")

    def _average(self, arch):
        return os.path.join(self.save_dir(arch), AVERAGE)

    def _record(self, settings, outcome):
        """Saves the finished training ``outcome`` as the record of its step train/MODEL (see :meth:`_done`)."""
        self.steps.finish(f"train/{outcome.arch}", settings, self._inputs(), [outcome.checkpoint], outcome)

    def recipe_of(self, arch):
        return replace(self.recipe, seed=seeds.trained(*self.split(arch), self.seed_offsets))

    def settings(self, arch, flags):
        return dict(step_settings(self.recipe_of(arch), self.budget, self.plan), flags=list(flags))

    def _inputs(self):
        return {"data": self.data_bin}

    def _pid_path(self, arch):
        return os.path.join(self.save_dir(arch), "train.pid")

    def _start(self, arch, flags, env):
        save_dir = self.save_dir(arch)
        pid_path = self._pid_path(arch)
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
        before = fairseq_log.progress(self.log_path(arch))
        if os.path.exists(last):
            self.log(f"train: resuming {arch} from {last} (epoch {before.epoch}, update {before.updates} in its log)")
            self.done_before[arch] = self.budget.used(before.epoch, before.step, before.steps, before.updates, 0)
        elif os.path.exists(self.log_path(arch)):
            self._restart(arch, before.updates)
        else:
            self.log(f"train: starting {arch} ({self.budget})")
        self.steps.begin(f"train/{arch}", self.settings(arch, flags))
        log_file = open(self.log_path(arch), "a")
        log_file.write(f"{fairseq_log.START_MARK}{time.time():.3f}\n")
        log_file.flush()
        command = train_command(self.data_bin, save_dir, self.split(arch)[0], flags, self.recipe_of(arch),
                                self.budget, self.plan.train_flags())
        process = self.pool.popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=subprocess_env(**env))
        with open(pid_path, "w") as f:
            f.write(str(process.pid))
        self.log_files[arch] = log_file
        return process

    def _restart(self, arch, updates):
        """A model trained before whose checkpoint_last.pt is gone starts from update 0: its old log (curve,
        time) and checkpoints would mix into the new ones, so they are set aside."""
        discarded = self.log_path(arch) + ".discarded"
        self.log(f"train: {arch}: {self.save_dir(arch)}/checkpoint_last.pt is gone (its log reached update "
                 f"{updates}), so it trains again from update 0; its validation curve starts again (the old log "
                 f"is {discarded})")
        with open(self.log_path(arch), errors="replace") as old, open(discarded, "a") as f:
            f.write(old.read())
        os.remove(self.log_path(arch))
        restart.set_aside(self.save_dir(arch), self.log, f"train: {arch}")  # issue 49: not deleted unsaid

    def _close(self, arch):
        self.log_files.pop(arch).close()
        os.remove(self._pid_path(arch))

    def _ended(self, arch, process):
        """The outcome of a training process that exited."""
        self._close(arch)
        wrapper_lines.forward(self.log_path(arch), process.returncode, f"train: {arch}", self.log)  # issue 49
        if process.returncode == 0:
            return self._finish(arch)
        with open(self.log_path(arch), errors="replace") as f:
            tail = f.readlines()[-15:]
        if process.returncode < 0:  # killed by a signal (kill -9, the OOM killer): its checkpoints stay
            reason = (f"fairseq-train was killed (signal {-process.returncode}); re-running the same command "
                      "resumes it from its last checkpoint")
            self.log(f"train: {arch} FAILED: {reason}")
        else:  # its flags or data are wrong: they must not lock --out
            self.steps.forget(f"train/{arch}")
            reason = f"fairseq-train exit {process.returncode}: " + wrapper_lines.reason(tail)  # issue 49
            self.log(f"train: {arch} FAILED ({reason}); end of {self.log_path(arch)}:\n"
                     + "".join("    " + line for line in tail))
        return TrainOutcome(arch, failed=reason)

    def _finish(self, arch):
        """Averages the last checkpoints of a finished training and records the step."""
        files = averaged_files(self.save_dir(arch), self.log_path(arch), self.budget, self.recipe.average)
        if not files:
            raise RuntimeError(f"{arch}: fairseq-train saved no checkpoint (see {self.log_path(arch)})")
        checkpoint = self._average(arch)
        write_average(files, checkpoint)
        progress = fairseq_log.progress(self.log_path(arch))
        outcome = TrainOutcome(arch, checkpoint, [os.path.basename(f) for f in files], progress.epoch,
                               progress.updates,
                               converged=fairseq_log.stopped_early(self.log_path(arch)) if self.budget.patience
                               else None)
        self._record(self.steps.load(f"train/{arch}").settings, outcome)
        self.log(f"train: {arch} finished ({outcome.updates} updates, epoch {outcome.epochs}"
                 + ({True: ", converged", False: ", stopped by the cap: not converged"}.get(outcome.converged, ""))
                 + "; averaged "
                 f"{', '.join(outcome.averaged)})")
        return outcome

    def delete_checkpoints(self, model, positions):
        """Removes the checkpoints of ``model`` (the step train/MODEL stays finished): the averaged one leaves
        its record with the model's (source, target) ``positions``, which translation reads instead
        (:func:`posnet_fairseq.compare.quality.model_limits`); returns the bytes freed."""
        save_dir, freed = self.save_dir(model), 0
        for name in sorted(os.listdir(save_dir)):
            path = os.path.join(save_dir, name)
            if not name.endswith(".pt"):
                continue
            freed += os.path.getsize(path)
            if name == AVERAGE:
                self.steps.delete(path, positions=list(positions))
            else:
                os.remove(path)
        return freed

    def _progress(self, archs, finished, clock):
        running = {arch: fairseq_log.progress(self.log_path(arch)) for arch in archs
                   if arch not in finished and arch in self.pool.running}
        # every model reads the same data-bin in batches of the same --max-tokens: the same steps per epoch
        expected = self.budget.expected(finished.values(), max((p.steps for p in running.values()), default=1))

        def share(used):
            return min(1.0, used / expected)
        parts, fractions = [], []
        for arch in archs:
            if arch in finished:
                fractions.append(1.0)
            elif arch in running:
                p = running[arch]
                fractions.append(share(self.budget.used(p.epoch, p.step, p.steps, p.updates,
                                                        time.time() - self.pool.running[arch].started)))
                parts.append(f"{arch} epoch {p.epoch} update {p.updates}")
            else:
                fractions.append(0.0)
        # ETA from the work done in this run: models finished earlier, and what resumed ones had done before,
        # do not count (they would make a resumed run look nearly done).
        before = sum(share(self.done_before.get(arch, 0.0)) for arch in archs)
        todo = len(archs) - before
        now_done = sum(fractions) - before
        elapsed = clock.elapsed()
        eta = f"ETA {elapsed * (todo - now_done) / now_done / 60:.0f} min" if now_done > 0.02 else "ETA -"
        self.log(f"progress: model {len(finished)}/{len(archs)} finished; running: "
                 f"{', '.join(parts) or 'none'}; {eta}")

    def _stopped(self, arch, _):
        self._close(arch)
        self.log(f"train: stopped {arch}; a re-run resumes it")

    def _done(self, arch, flags):
        """The finished training of ``arch``, or None when it must train. Its step's record, when that holds
        these settings and inputs and its outputs are intact, is the only rule for skipping a training; else
        a record is made without training where one can be: taken from a --reuse-from run (:meth:`_reuse`),
        or from the checkpoints of a training that finished before its average was written (or lost it)."""
        name = f"train/{arch}"
        outcome, why = self.steps.record(name, self.settings(arch, flags), self._inputs(),
                                         functools.partial(TrainOutcome.read, arch, self._average(arch)))
        if outcome is not None:
            self.log(f"train: skipped {arch}, finished earlier ({self._average(arch)})")
            return outcome
        reused = self._reuse(arch, flags)
        if reused is not None:
            return reused
        if fairseq_log.finished(self.log_path(arch)) and averaged_files(
                self.save_dir(arch), self.log_path(arch), self.budget, self.recipe.average):
            # Interrupted after training, before averaging, or the average was lost: resuming would train
            # one more update.
            self.log(f"train: {arch} finished training earlier ({why}); averaging its checkpoints")
            self.steps.begin(name, self.settings(arch, flags))
            return self._finish(arch)
        return None

    def _reuse(self, arch, flags):
        """The outcome of ``arch`` taken from the first run of ``reuse_from`` where its step's record holds this
        run's settings (recipe, budget, seed, flags) and data of the same content, its outputs intact: its
        averaged checkpoint and training log linked here and recorded as this run's step; None when no run
        has it."""
        name, settings = f"train/{arch}", self.settings(arch, flags)
        for other in self.reuse_from:
            log = os.path.join(other.out, "checkpoints", f"{arch}.train.log")
            theirs = self._their_data(other)
            found, _ = other.record(name, settings, {"data": theirs}, functools.partial(TrainOutcome.read, arch, None))
            if found is None or not os.path.exists(log):
                continue  # not finished there with these settings, or not intact
            checkpoint = other.absolute(next(iter(other.load(name).outputs)))
            if deleted(checkpoint) is not None or not self._same_data(other, theirs):
                continue  # its checkpoint deleted there, or other data
            return self._adopt(replace(found, reused_from=other.out), checkpoint, log, settings,
                               f"taken from {other.out} (--reuse-from: finished there with the same data, "
                               "settings and flags)")
        return None

    def _their_data(self, other):
        """The data-bin the run ``other`` (its Steps) trained on: its own, or --data's."""
        own = os.path.join(other.out, "data-bin")
        return own if os.path.isdir(own) else self.data_bin

    def _same_data(self, other, theirs):
        """Whether ``theirs`` (the data-bin of the run ``other``) holds this run's data; compared once per run."""
        if other.out not in self.same_data:
            self.same_data[other.out] = theirs == self.data_bin or \
                other.content(theirs, skip=DATA_LOG) == self.steps.content(self.data_bin, skip=DATA_LOG)
        return self.same_data[other.out]

    def _share(self, arch, flags, leader):
        """The outcome of ``arch``, whose architecture, seed and flags are those of the finished training
        ``leader`` (its TrainOutcome): its checkpoint and training log are the leader's (linked), recorded as its
        own step."""
        done = self._done(arch, flags)
        if done is not None:
            return done
        return self._adopt(replace(leader, arch=arch, trained_as=leader.arch), leader.checkpoint,
                           self.log_path(leader.arch), self.settings(arch, flags),
                           f"shares the training of {leader.arch} (the same architecture, seed and flags)")

    def _adopt(self, outcome, checkpoint, log, settings, how):
        """Records the step of ``outcome.arch`` as a training done elsewhere: its averaged checkpoint and
        training log become links to ``checkpoint`` and ``log``; ``how`` says where from, in the run's log."""
        arch = outcome.arch
        self.steps.begin(f"train/{arch}", settings)
        os.makedirs(self.save_dir(arch), exist_ok=True)
        outcome = replace(outcome, checkpoint=self._average(arch))
        _link(checkpoint, outcome.checkpoint)
        _link(log, self.log_path(arch))
        self._record(settings, outcome)
        self.log(f"train: {arch} {how}")
        return outcome

    def run(self, archs, flags):
        """Trains ``archs`` (the models' names, see ``split``; ``flags[arch]``: its fairseq flags); returns
        {arch: TrainOutcome}. A model whose architecture, seed and flags are an earlier model's is not trained
        again: it shares that training (a variant that differs only in how it translates)."""
        followers = self.followers(archs, flags)
        outcomes = self._train([a for a in archs if a not in followers], flags)
        for arch, leader in followers.items():
            outcomes[arch] = self._share(arch, flags[arch], outcomes[leader]) if outcomes[leader].checkpoint \
                else TrainOutcome(arch, failed=f"it shares the training of {leader}, which failed: "
                                               f"{outcomes[leader].failed}")
        return {arch: outcomes[arch] for arch in archs}

    def followers(self, archs, flags):
        """{model: the earlier model of ``archs`` whose training it shares}: the same architecture, seed and
        flags, and the same --seed-offset (a model of other seeds never shares a training)."""
        leaders, followers = {}, {}
        for arch in archs:
            name, seed = self.split(arch)
            key = (architecture(name), seed, self.seed_offsets.get(name, 0), tuple(flags[arch]))
            followers[arch] = leaders.setdefault(key, arch)
        return {arch: leader for arch, leader in followers.items() if leader != arch}

    def _train(self, archs, flags):
        outcomes = {}
        for arch in archs:
            outcome = self._done(arch, flags[arch])
            if outcome is not None:
                outcomes[arch] = outcome
                self.done_before[arch] = math.inf
        clock, last_progress = RunClock(self.pool.jobs_stop_with_runner), [time.time()]

        def ended(arch, process):
            outcomes[arch] = self._ended(arch, process)

        def every():
            clock.poll()
            if time.time() - last_progress[0] >= self.progress_every and self.pool.running:
                self._progress(archs, outcomes, clock)
                last_progress[0] = time.time()

        self.pool.run([a for a in archs if a not in outcomes], lambda arch, env: self._start(arch, flags[arch], env),
                      ended, stopped=self._stopped, every=every)
        return outcomes
