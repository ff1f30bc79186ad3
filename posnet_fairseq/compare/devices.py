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
"""
import os
from dataclasses import dataclass
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class Plan:
    device: str  # "cpu" | "cuda"
    slots: Tuple[Dict[str, str], ...]  # environment overrides of each job running at once
    fp16: bool = False
    name: str = "CPU"  # the device's name as results.md gives it

    @property
    def jobs(self) -> int:
        return len(self.slots)

    def train_flags(self):
        return ["--fp16"] if self.fp16 else []

    def generate_flags(self):
        return ["--fp16"] if self.fp16 else []

    def describe(self) -> str:
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
