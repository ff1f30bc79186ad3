"""Decoding speed of fairseq-generate at forced output lengths, on CPU.

:func:`generate_timed` decodes a binarized split in-process
(``fairseq_cli.generate.main``) with ``--min-len L --max-len-a 0 --max-len-b
L``, so every hypothesis has L tokens plus EOS and every model runs the same
number of decoder steps. It returns fairseq's own sentences/s (generation
only, loading excluded), the output tokens per hypothesis and the process CPU
seconds spent inside ``SequenceGenerator.generate`` (:class:`CpuClock`): on a
machine shared with other jobs the CPU time is the steadier figure, and it
reads like the wall clock only with one torch thread.

:func:`time_rounds` alternates the checkpoints within each round, so slow
phases of a shared machine hit every model alike; report medians over rounds.
:func:`random_checkpoint` and :func:`synthetic_data_bin` give an untrained
model and a corpus when only speed matters (speed does not depend on the
weights). ``benchmarks/decode_speed.py`` and ``posnet-compare`` use these.
"""
import logging
import os
import time

from ..plugin import PLUGIN_DIR


def quiet():
    """Warnings only: fairseq-generate's own basicConfig(INFO) is then a no-op."""
    logging.basicConfig(level=logging.WARNING, force=True)


def synthetic_data_bin(workdir, sentences, train=2000):
    """The synthetic corpus (posnet_fairseq.data.synth) with ``sentences`` test sentences,
    binarized with a joined dictionary (word level); reused when it exists."""
    from fairseq import options
    from fairseq_cli import preprocess

    from ..data.synth import write_corpus

    bin_dir = os.path.join(workdir, f"data-bin-{sentences}")
    if os.path.exists(os.path.join(bin_dir, "test.src-tgt.src.bin")):
        return bin_dir
    raw = os.path.join(workdir, f"raw-{sentences}")
    write_corpus(raw, train=train, valid=10, test=sentences, seed=1)
    args = options.get_preprocessing_parser().parse_args([
        "--source-lang", "src", "--target-lang", "tgt", "--trainpref", f"{raw}/train",
        "--validpref", f"{raw}/valid", "--testpref", f"{raw}/test", "--destdir", bin_dir,
        "--joined-dictionary", "--workers", "1",
    ])
    preprocess.main(args)
    return bin_dir


def random_checkpoint(data_bin, arch, model_flags, path, source_lang="src", target_lang="tgt"):
    """Saves a freshly initialised ``arch`` the way fairseq-train saves checkpoints; returns its
    parameter count."""
    import torch
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        data_bin, "--user-dir", PLUGIN_DIR, "--arch", arch, "--source-lang", source_lang,
        "--target-lang", target_lang, "--share-all-embeddings", *model_flags,
    ])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(1)
    model = task.build_model(cfg.model)
    state = {
        "args": None,
        "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
        "model": model.state_dict(),
        "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "Adam",
                               "lr_scheduler_state": {"best": None}, "num_updates": 0}],
        "extra_state": {},
        "last_optimizer_state": None,
    }
    torch.save(state, path)
    return sum(p.numel() for p in model.parameters())


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


class CpuClock:
    """Process CPU seconds spent inside SequenceGenerator.generate (all calls, summed)."""

    seconds = 0.0
    _installed = False

    @classmethod
    def install(cls):
        if cls._installed:
            return
        from fairseq.sequence_generator import SequenceGenerator

        inner = SequenceGenerator.generate

        def timed(self, *a, **kw):
            start = time.process_time()
            try:
                return inner(self, *a, **kw)
            finally:
                cls.seconds += time.process_time() - start

        SequenceGenerator.generate = timed
        cls._installed = True


def generate_timed(data_bin, checkpoint, length, results_dir, beam=4, batch_size=32, subset="test",
                   source_lang="src", target_lang="tgt", cpu=True):
    """One fairseq-generate run at output length ``length``; returns {"rate": sentences/s,
    "tokens_per_hyp": output tokens per hypothesis incl. EOS, "cpu_s": CPU seconds generating}."""
    from fairseq import options
    from fairseq_cli import generate as fairseq_generate

    CpuClock.install()
    gen_args = options.parse_args_and_arch(options.get_generation_parser(), [
        data_bin, "--user-dir", PLUGIN_DIR, "--path", checkpoint, "--source-lang", source_lang,
        "--target-lang", target_lang, "--gen-subset", subset, "--beam", str(beam),
        "--batch-size", str(batch_size), "--required-batch-size-multiple", "1",
        "--min-len", str(length), "--max-len-a", "0", "--max-len-b", str(length),
        "--num-workers", "0", "--results-path", results_dir, *(["--cpu"] if cpu else []),
    ])
    # The summary line is logged at INFO by "fairseq_cli.generate": only that
    # logger speaks at INFO, to the capture handler alone.
    capture = _Capture()
    gen_logger = logging.getLogger("fairseq_cli.generate")
    gen_logger.addHandler(capture)
    gen_logger.setLevel(logging.INFO)
    gen_logger.propagate = False
    cpu_before = CpuClock.seconds
    try:
        fairseq_generate.main(gen_args)
    finally:
        gen_logger.removeHandler(capture)
    # "Translated 128 sentences (3,968 tokens) in 4.1s (31.05 sentences/s, 961.6 tokens/s)"
    line = next(m for m in capture.messages if m.startswith("Translated"))
    sentences = int(line.split()[1].replace(",", ""))
    tokens = int(line.split("(")[1].split()[0].replace(",", ""))
    return {"rate": float(line.split("(")[2].split()[0]), "tokens_per_hyp": tokens / sentences,
            "cpu_s": CpuClock.seconds - cpu_before}


def time_rounds(checkpoints, data_bin, lengths, rounds, results_dir, on_round=None, **generate_kw):
    """{(name, length): [generate_timed result per round]} for ``checkpoints`` ({name: path}),
    which alternate within each round; ``on_round(round_index)`` is called after each round."""
    runs = {(name, length): [] for name in checkpoints for length in lengths}
    for r in range(rounds):
        for length in lengths:
            for name, path in checkpoints.items():
                runs[name, length].append(generate_timed(data_bin, path, length, results_dir, **generate_kw))
        if on_round is not None:
            on_round(r)
    return runs
