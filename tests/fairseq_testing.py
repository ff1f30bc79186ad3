"""Test utilities: build tiny posnet models from command-line flags, drive the
decoder (or one mixer) step by step the way fairseq's SequenceGenerator does,
and run fairseq's CLIs in-process on the synthetic corpus. (fairseq's own
tests/utils.py is not in any wheel.)
"""
import collections
import contextlib
import io
import logging
import os

import torch
from fairseq import options
from fairseq.data import Dictionary
from fairseq.tasks.translation import TranslationTask

import posnet_fairseq

PLUGIN_DIR = os.path.dirname(os.path.abspath(posnet_fairseq.__file__))
VOCAB = 24

# Small enough to run hundreds of builds, big enough for several heads.
TINY_DIMS = [
    "--encoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2",
    "--encoder-layers", "2", "--decoder-embed-dim", "16", "--decoder-ffn-embed-dim", "32",
    "--decoder-attention-heads", "2", "--decoder-layers", "2",
]


def dummy_dictionary(size=VOCAB):
    d = Dictionary()
    for i in range(size):
        d.add_symbol(f"w{i}")
    d.finalize(padding_factor=1)
    return d


def parse_train_args(argv):
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, ["/nonexistent-data", "--user-dir", PLUGIN_DIR] + list(argv))


def build_model(flags=(), arch="posnet_transformer_tiny", seed=1, dims=TINY_DIMS):
    """A model in eval mode (dropout off) built from fairseq flags, with a dummy task."""
    args = parse_train_args(["--arch", arch, "--dropout", "0", "--attention-dropout", "0", *dims, *flags])
    dictionary = dummy_dictionary()
    task = TranslationTask(args, dictionary, dictionary)
    torch.manual_seed(seed)
    return task.build_model(args).eval(), task


def src_batch(sentences, pad, eos):
    """Left-padded B x S source tokens (fairseq's default) and lengths."""
    longest = max(len(s) for s in sentences)
    tokens = torch.full((len(sentences), longest + 1), pad, dtype=torch.long)
    for i, s in enumerate(sentences):
        row = torch.tensor(list(s) + [eos])
        tokens[i, longest + 1 - len(row):] = row
    return tokens, torch.tensor([len(s) + 1 for s in sentences])


def tgt_batch(sentences, pad, eos):
    """Right-padded B x T decoder inputs: EOS as BOS, then the tokens."""
    longest = max(len(s) for s in sentences)
    tokens = torch.full((len(sentences), longest + 1), pad, dtype=torch.long)
    for i, s in enumerate(sentences):
        tokens[i, : len(s) + 1] = torch.tensor([eos] + list(s))
    return tokens


def random_sentences(lengths, generator, dictionary):
    low = dictionary.nspecial
    return [torch.randint(low, len(dictionary), (n,), generator=generator).tolist() for n in lengths]


def random_batch(dictionary, src_lengths, tgt_lengths, seed=0):
    """Random sentences of the given lengths as a model's inputs: left-padded source
    tokens and their lengths (:func:`src_batch`), right-padded decoder inputs
    (:func:`tgt_batch`)."""
    g = torch.Generator().manual_seed(seed)
    pad, eos = dictionary.pad(), dictionary.eos()
    tokens, lengths = src_batch(random_sentences(src_lengths, g, dictionary), pad, eos)
    return tokens, lengths, tgt_batch(random_sentences(tgt_lengths, g, dictionary), pad, eos)


def padded_batch(lengths, left, dim, seed=1):
    """fp64 T x B x dim mixer inputs and a B x T padding mask (left- or right-padded)."""
    g = torch.Generator().manual_seed(seed)
    longest = max(lengths)
    x = torch.randn(longest, len(lengths), dim, generator=g, dtype=torch.double)
    pad = torch.ones(len(lengths), longest, dtype=torch.bool)
    for b, n in enumerate(lengths):
        if left:
            pad[b, longest - n:] = False
        else:
            pad[b, :n] = False
    return x, pad


DecodingStep = collections.namedtuple("DecodingStep", "logits prefix encoder_out")


def decode_steps(model, src_tokens, src_lengths, prev_output_tokens, reorder=None):
    """Feeds ``prev_output_tokens`` (B x T) to the decoder one position at a time
    with one incremental state, the way fairseq's SequenceGenerator does.

    ``reorder`` maps a step to the row order applied before it, as the generator
    does between steps (beams permuted within a sentence, finished sentences
    dropped): the incremental state, the encoder output and the token rows all
    follow it. Returns one :class:`DecodingStep` per step: its B_t x V logits,
    and the B_t x (t + 1) prefix and encoder output they were computed from, so
    that a caller can recompute them without the state.
    """
    reorder = reorder or {}
    steps, state = [], {}
    with torch.no_grad():
        encoder_out = model.encoder(src_tokens, src_lengths)
        for t in range(prev_output_tokens.size(1)):
            if t in reorder:
                order = reorder[t]
                model.decoder.reorder_incremental_state_scripting(state, order)
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
                prev_output_tokens = prev_output_tokens[order]
            prefix = prev_output_tokens[:, : t + 1]
            out = model.decoder(prefix, encoder_out=encoder_out, incremental_state=state)[0]
            assert out.size(1) == 1, f"step {t}: the decoder returned {out.size(1)} positions, not the last one"
            steps.append(DecodingStep(out[:, 0], prefix, encoder_out))
    return steps


def decode_incrementally(model, src_tokens, src_lengths, prev_output_tokens):
    """B x T x V logits of :func:`decode_steps` without reordering: comparable with
    the teacher-forced ``model(src_tokens, src_lengths, prev_output_tokens)[0]``."""
    steps = decode_steps(model, src_tokens, src_lengths, prev_output_tokens)
    return torch.stack([step.logits for step in steps], dim=1)


def step_mixer(mixer, x, block=1, incremental_state=None):
    """Feeds self-attention input ``x`` (T x B x C) to ``mixer`` ``block`` positions
    at a time with one incremental state, as the decoder does while generating.
    Returns the T x B x C outputs, comparable with ``mixer(x, x, x)[0]``, and the
    state (pass it back to continue decoding)."""
    state = {} if incremental_state is None else incremental_state
    outputs = []
    for t in range(0, x.size(0), block):
        chunk = x[t: t + block]
        outputs.append(mixer(chunk, chunk, chunk, incremental_state=state)[0])
    return torch.cat(outputs), state


def run_cli(main_fn, argv, parser_fn):
    """Runs a fairseq_cli main in-process with argv, quietly; returns its stdout."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.distributed import utils as distributed_utils

    parser = parser_fn()
    args = options.parse_args_and_arch(parser, argv)
    out = io.StringIO()
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stdout(out):
            if main_fn.__module__.endswith("train"):
                distributed_utils.call_main(convert_namespace_to_omegaconf(args), main_fn)
            else:
                main_fn(args)
    finally:
        logging.disable(logging.NOTSET)
    return out.getvalue()


def write_synthetic_data_bin(directory, train=200, valid=20, test=20, seed=1, max_len=60):
    """The synthetic corpus (sentences of at most ``max_len`` tokens), word level,
    binarized with a joined dictionary."""
    from fairseq_cli import preprocess

    from posnet_fairseq.data.synth import write_corpus

    raw = os.path.join(directory, "raw")
    write_corpus(raw, train=train, valid=valid, test=test, seed=seed, max_len=max_len)
    bin_dir = os.path.join(directory, "data-bin")
    parser = options.get_preprocessing_parser()
    args = parser.parse_args([
        "--source-lang", "src", "--target-lang", "tgt",
        "--trainpref", f"{raw}/train", "--validpref", f"{raw}/valid", "--testpref", f"{raw}/test",
        "--destdir", bin_dir, "--joined-dictionary", "--workers", "1",
    ])
    logging.disable(logging.WARNING)
    try:
        preprocess.main(args)
    finally:
        logging.disable(logging.NOTSET)
    return bin_dir


def train_and_generate(data_bin, save_dir, arch, extra=(), updates=2, dims=TINY_DIMS):
    """fairseq-train ``updates`` updates, then fairseq-generate with beam 4 from the checkpoint."""
    from fairseq_cli import generate, train

    run_cli(train.main, [
        data_bin, "--user-dir", PLUGIN_DIR, "--arch", arch, *dims, *extra,
        "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "400", "--max-update", str(updates),
        "--save-dir", save_dir, "--no-progress-bar", "--num-workers", "0", "--seed", "1",
        "--no-epoch-checkpoints", "--disable-validation",
    ], options.get_training_parser)
    checkpoint = os.path.join(save_dir, "checkpoint_last.pt")
    out = run_cli(generate.main, [
        data_bin, "--user-dir", PLUGIN_DIR, "--path", checkpoint, "--beam", "4", "--batch-size", "8",
        "--gen-subset", "test", "--max-len-b", "20", "--num-workers", "0", "--required-batch-size-multiple", "1",
    ], options.get_generation_parser)
    return checkpoint, out

