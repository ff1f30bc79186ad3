"""Where a ``posnet-compare`` run trains, translates and times its models.

Without a CUDA device (or with ``--device cpu``) every model trains in its
own process with one thread, ``--jobs`` of them at a time (default: one per
core), and the cost figures are CPU figures. With CUDA devices, one model
trains (and translates) per GPU at a time, each process seeing only its GPU
(``CUDA_VISIBLE_DEVICES``), in fp16 unless ``--no-fp16``; the batch
(``--max-tokens``, one GPU, no gradient accumulation) and so the tokens per
update are the same as on the CPU. Decoding speed is then timed on the
first GPU, and the training speed is fairseq-train's own throughput on its
GPU; the training-step memory stays a CPU measurement
(:mod:`posnet_fairseq.benchmark.memory` runs on the CPU). :meth:`Plan.describe`
says which figure comes from which device, for ``results.md``.

With ``--launcher slurm`` (:func:`cluster_plan`) every model trains, and is
translated, in a SLURM job of its own (its GPUs or cores), and the driver
measures the cost on its own machine after the jobs (docs/cluster.md).
"""
import os
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ..process_pool import ProcessPool


@dataclass(frozen=True)
class Cluster:
    """Where a run's jobs go: the launcher's run directory and queue ("slurm"; "local" in tests), the
    sbatch options (:class:`~posnet_fairseq.launcher.units.SlurmOptions`) and the squeue interval."""

    run_dir: str
    options: object
    queue: str = "slurm"
    poll_seconds: float = 10.0


@dataclass(frozen=True)
class Plan:
    device: str  # "cpu" | "cuda"
    slots: Tuple[Dict[str, str], ...]  # environment overrides of each job running at once
    fp16: bool = False
    name: str = "CPU"  # the device's name as results.md gives it
    cluster: Optional[Cluster] = None  # None: local processes, one per slot at a time

    @property
    def jobs(self) -> int:
        return len(self.slots)

    def train_flags(self):
        return ["--fp16"] if self.fp16 else []

    def generate_flags(self):
        return ["--fp16"] if self.fp16 else []

    def pool(self, kind, log, poll_seconds=0.5):
        """What runs the ``kind`` ("train", "translate") processes: the local pool, one per slot at a
        time, or the cluster's jobs (:class:`~posnet_fairseq.launcher.pool.JobPool`, all at once)."""
        if self.cluster is None:
            return ProcessPool(self.slots, poll_seconds)
        from ..launcher.pool import JobPool

        return JobPool(self.cluster.run_dir, self.cluster.queue, self.cluster.options, kind, log, self.slots[0],
                       self.cluster.poll_seconds)

    def describe(self) -> str:
        if self.cluster is not None:
            options = self.cluster.options
            each = f"{options.gpus_per_job} GPU(s)" if options.gpus_per_job else f"{options.cpus_per_job} core(s)"
            return (f"SLURM: training and test translation one job per model, {each} each, "
                    f"{'fp16' if self.fp16 else 'fp32'}; training step, its memory and decoding speed measured "
                    f"by the driver on its own machine ({self.name}), one model at a time")
        if self.device == "cpu":
            return (f"CPU: training and test translation {self.jobs} model(s) at a time, one thread each; "
                    "training step, its memory and decoding speed measured one model at a time on one thread")
        return (f"GPU ({self.name}): training and test translation one model per GPU, {self.jobs} GPU(s), "
                f"{'fp16' if self.fp16 else 'fp32'}; train tokens/s: fairseq-train's own throughput on its GPU "
                "(median of its log lines); decoding speed: the first GPU, fp32; step memory: one training step "
                "on the CPU, one thread")


def plan(device: str = "auto", jobs: Optional[int] = None, fp16: bool = True) -> Plan:
    """The plan for ``--device`` (auto, cpu, cuda), ``--jobs`` and fp16 (default on a GPU).
    Raises ValueError naming the flag when the request cannot be met."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device == "cuda" and not gpus:
        raise ValueError("--device cuda: torch sees no CUDA device")
    if device == "cpu" or not gpus:
        jobs = jobs or len(os.sched_getaffinity(0))
        return Plan("cpu", tuple({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} for _ in range(jobs)))
    if jobs is not None and jobs > gpus:
        raise ValueError(f"--jobs {jobs}: one model per GPU at a time, and torch sees {gpus} GPU(s)")
    # CUDA_VISIBLE_DEVICES, when set, numbers the GPUs torch counts.
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",")[:gpus] if visible else [str(i) for i in range(gpus)]
    return Plan("cuda", tuple({"CUDA_VISIBLE_DEVICES": ids[i]} for i in range(jobs or gpus)), fp16=fp16,
                name=torch.cuda.get_device_name(0))


def cluster_plan(cluster, models, fp16=True) -> Plan:
    """The plan of a run whose ``models`` train as jobs of ``cluster``: on the jobs' GPUs (fp16 unless told
    otherwise, one GPU per model as locally) or cores (as many threads as the job has). The driver measures
    the cost on its own machine: with GPU jobs, on its GPU (ValueError naming the flag when it has none)."""
    import torch

    options = cluster.options
    if not options.gpus_per_job:
        threads = str(options.cpus_per_job)
        return Plan("cpu", ({"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads},) * models,
                    cluster=cluster)
    if not torch.cuda.is_available():
        raise ValueError(f"--gpus-per-job {options.gpus_per_job}: the driver times decoding on a GPU of its own "
                         "after the jobs, and torch sees none here; run posnet-compare on a GPU node (e.g. in "
                         "salloc --gpus 1), or train on CPU jobs (--gpus-per-job 0)")
    return Plan("cuda", ({},) * models, fp16=fp16, name=torch.cuda.get_device_name(0), cluster=cluster)
