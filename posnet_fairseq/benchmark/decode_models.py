"""The models the decoding benchmark (:mod:`.decode_speed`) times, and the corpus they decode.

:func:`random_model` (saved by :func:`save_checkpoint`) and
:func:`synthetic_data_bin` give an untrained model and a corpus when only
speed matters (speed does not depend on the weights). :func:`fairseq_rows`
makes the checkpoints fairseq-generate decodes (with ``--int8``, each also
with int8 linear layers) and counts their arithmetic; :func:`ctranslate2_rows`
converts those that convert with CTranslate2 (:mod:`.ctranslate2_decoding`: the Transformer, and the Shaw-relative
and T5-bias models through :mod:`.ctranslate2_relative`).
"""
import os

from ..plugin import PLUGIN_DIR


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


def random_model(data_bin, arch, model_flags, source_lang="src", target_lang="tgt"):
    """A freshly initialised ``arch`` (seed 1) for ``data_bin``'s dictionaries, and fairseq's config."""
    import torch
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), [
        data_bin, "--user-dir", PLUGIN_DIR, "--arch", arch, "--source-lang", source_lang,
        "--target-lang", target_lang, "--share-all-embeddings", *model_flags,
    ])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(1)
    return task.build_model(cfg.model), cfg


def checkpoint_state(model, cfg):
    """``model`` as fairseq-train stores it in a checkpoint (``cfg`` as plain containers)."""
    from omegaconf import OmegaConf

    return {
        "args": None,
        "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
        "model": model.state_dict(),
        "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "Adam",
                               "lr_scheduler_state": {"best": None}, "num_updates": 0}],
        "extra_state": {},
        "last_optimizer_state": None,
    }


def save_checkpoint(model, cfg, path):
    """Saves ``model`` the way fairseq-train saves checkpoints; returns its parameter count."""
    import torch

    torch.save(checkpoint_state(model, cfg), path)
    return sum(p.numel() for p in model.parameters())


def mean_source_length(workdir, sentences):
    """Mean source tokens per test sentence of :func:`synthetic_data_bin`'s corpus, EOS included."""
    with open(os.path.join(workdir, f"raw-{sentences}", "test.src")) as f:
        lengths = [len(line.split()) + 1 for line in f]
    return sum(lengths) / len(lengths)


def fairseq_rows(args, archs, data_bin, source_length):
    """The fairseq rows: {row: checkpoint}, {row: parameters}, {row: target positions} and {(row, length): FLOPs
    per generated token}; with --int8 each arch also as ``ARCH-int8`` (its linear layers quantised:
    :mod:`posnet_fairseq.models.int8`; the same products, so the same count)."""
    import torch

    from ..models import int8
    from . import flops

    checkpoints, params, limit, arithmetic = {}, {}, {}, {}
    for arch in archs:
        model, cfg = random_model(data_bin, arch, args.model_flags)
        state = checkpoint_state(model, cfg)
        checkpoints[arch] = os.path.join(args.workdir, f"{arch}.pt")
        torch.save(state, checkpoints[arch])
        params[arch] = sum(p.numel() for p in model.parameters())
        limit[arch] = model.max_positions()[1]
        reachable = [length for length in args.lengths if length + 1 <= limit[arch]]  # L tokens + EOS
        if reachable:
            per_token = flops.decoding_flops(model, source_length, [length + 1 for length in reachable], args.beam)
            arithmetic.update({(arch, length): per_token[length + 1] for length in reachable})
        if args.int8:
            row = f"{arch}-int8"
            checkpoints[row] = os.path.join(args.workdir, f"{row}.pt")
            torch.save(int8.quantized_checkpoint(state, model, "all"), checkpoints[row])
            params[row], limit[row] = params[arch], limit[arch]
            arithmetic.update({(row, length): arithmetic[arch, length] for length in reachable})
    return checkpoints, params, limit, arithmetic


def ctranslate2_rows(args, checkpoints, archs, data_bin):
    """The rows of ``archs`` converted with CTranslate2 (:mod:`.ctranslate2_decoding`), fp32 and int8: ({row:
    decode(length)}, {row: its arch}, [(row, why it has no figures)]). The first arch's rows are named
    ``ctranslate2 fp32`` / ``ctranslate2 int8`` (the baseline users deploy), the others' ``ARCH ctranslate2
    fp32`` / ``ARCH ctranslate2 int8``, on ``args.device``; an arch that does not convert has no rows, and the
    reason is printed (for the first arch, its rows say it)."""
    import functools

    import torch

    from . import ctranslate2_decoding as ct2

    why = ct2.missing()
    if why:
        return {}, {}, [(row, f"not measured: {why}") for row in ct2.ROW_NAMES.values()]
    sources = ct2.source_sentences(data_bin)
    rows, of, unmeasured = {}, {}, []
    for arch in archs:
        first = arch == archs[0]
        model_dir = os.path.join(args.workdir, "ctranslate2" if first else f"ctranslate2-{arch}")
        refused = ct2.conversion_error(checkpoints[arch], data_bin, model_dir)
        if refused:
            print(f"# CTranslate2: {arch} does not convert: {refused}")
            if first:
                unmeasured += [(row, f"not measured: {arch} does not convert") for row in ct2.ROW_NAMES.values()]
            continue
        for compute_type in ct2.COMPUTE_TYPES:
            row = ct2.ROW_NAMES[compute_type] if first else f"{arch} {ct2.ROW_NAMES[compute_type]}"
            translator = ct2.Translator(model_dir, compute_type, torch.get_num_threads(), args.device)
            rows[row] = functools.partial(translator.translate_timed, sources, beam=args.beam,
                                          batch_size=args.batch_size)
            of[row] = arch
    return rows, of, unmeasured
