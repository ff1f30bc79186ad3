"""Test utilities: build tiny posnet models from command-line flags, drive the
decoder (or one mixer) step by step the way fairseq's SequenceGenerator does,
and run fairseq's CLIs in-process on the synthetic corpus. (fairseq's own
tests/utils.py is not in any wheel.)
"""
import collections
import contextlib
import io
import logging
import math
import os

import torch
from fairseq import options

import posnet_fairseq  # noqa: F401  (registers the plugin)
# A model is built, and fairseq-train's arguments parsed, as the benchmarks' training step does;
# the tests import these names from here.
from posnet_fairseq.benchmark.training_step import build_model as build_task_model
from posnet_fairseq.benchmark.training_step import dictionary, parse_train_args  # noqa: F401
from posnet_fairseq.plugin import PLUGIN_DIR  # noqa: F401

VOCAB = 24

# Small enough to run hundreds of builds, big enough for several heads.
TINY_DIMS = [
    "--encoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2",
    "--encoder-layers", "2", "--decoder-embed-dim", "16", "--decoder-ffn-embed-dim", "32",
    "--decoder-attention-heads", "2", "--decoder-layers", "2",
]


def dummy_dictionary(size=VOCAB):
    return dictionary(size, padding_factor=1)


def build_model(flags=(), arch="posnet_transformer_tiny", seed=1, dims=TINY_DIMS):
    """A model in eval mode (dropout off) built from fairseq flags, with a dummy task."""
    model, task = build_task_model(["--arch", arch, "--dropout", "0", "--attention-dropout", "0", *dims, *flags],
                                   dummy_dictionary(), seed)
    return model.eval(), task


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


def assert_decodes_as_it_trains(model, task, target_lengths=(6, 3), atol=1e-5):
    """Teacher-forced logits of a random two-sentence batch (sources of 7 and 4 tokens, targets of
    ``target_lengths``) equal :func:`decode_incrementally`'s for the unpadded first sentence, and are finite."""
    src, lengths, prev = random_batch(task.source_dictionary, [7, 4], list(target_lengths))
    with torch.no_grad():
        out = model(src, lengths, prev)[0]
    assert torch.allclose(decode_incrementally(model, src, lengths, prev)[0], out[0], atol=atol)
    assert math.isfinite(out.abs().max().item())


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


def decode_interleaved(mixer, xs, orders):
    """Searches on one mixer (self-attention inputs ``xs``, each T x B x C) run step for step in turn,
    each with its own incremental state, reordered before step t by ``orders[s][t]`` where given, as
    beam search does. Returns each search's T x B x C outputs."""
    xs, states, outs = list(xs), [{} for _ in xs], [[] for _ in xs]
    with torch.no_grad():
        for t in range(xs[0].size(0)):
            for s, order in enumerate(orders):
                if t in order:
                    mixer.reorder_incremental_state(states[s], order[t])
                    xs[s] = xs[s][:, order[t]]
                step = xs[s][t: t + 1]
                outs[s].append(mixer(step, step, step, incremental_state=states[s])[0])
    return [torch.cat(out) for out in outs]


def launching_kernels(function):
    """The operators of one call of ``function`` that would launch a kernel on a GPU
    (``posnet_fairseq.benchmark.launches.launching``), sorted by name, scalar reads included
    (``aten::_local_scalar_dense``: a device sync for a GPU tensor, no kernel for a host tensor)."""
    from posnet_fairseq.benchmark.launches import launching

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        function()
    return sorted(launching(profiler.events(), host_reads=True))


def step_kernels_after_reorder(context, layers, x, order):
    """``launching_kernels`` of a beam reorder and one decoding step of ``layers`` (decoder self-attention mixers
    sharing the side's ForwardContext ``context``), after steps over every row of ``x`` (T x B x C) but its last,
    in inference mode."""
    with torch.inference_mode():
        state = {}
        for t in range(x.size(0) - 1):
            with context.call():
                for layer in layers:
                    layer(x[t: t + 1], x[t: t + 1], x[t: t + 1], incremental_state=state)

        def step():
            for layer in layers:
                layer.reorder_incremental_state(state, order)
            with context.call():
                for layer in layers:
                    layer(x[-1:], x[-1:], x[-1:], incremental_state=state)
        return launching_kernels(step)


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



# ----- the mixer contract, as checks on a built model, on any device and dtype -----
# (tests/test_mixer_contract.py runs them on CPU in fp32, tests/test_cuda.py on CUDA
# in fp32, fp16 and bf16.)


def _device(model):
    return next(model.parameters()).device


def check_padding_invariance(model, d, atol, rtol=0.0):
    """A sentence gives the same encoder states and logits alone as beside longer ones."""
    device = _device(model)
    g = torch.Generator().manual_seed(0)
    srcs, tgts = random_sentences([5, 11, 3], g, d), random_sentences([4, 9, 2], g, d)
    tokens, lengths = (t.to(device) for t in src_batch(srcs, d.pad(), d.eos()))
    with torch.no_grad():
        enc = model.encoder(tokens, lengths)["encoder_out"][0]
        batched = model(tokens, lengths, tgt_batch(tgts, d.pad(), d.eos()).to(device))[0]
        for i, (src, tgt) in enumerate(zip(srcs, tgts)):
            one_tokens, one_lengths = (t.to(device) for t in src_batch([src], d.pad(), d.eos()))
            one_enc = model.encoder(one_tokens, one_lengths)["encoder_out"][0]
            alone = model(one_tokens, one_lengths, tgt_batch([tgt], d.pad(), d.eos()).to(device))[0]
            n = len(src) + 1  # real source tokens sit at the right end (left padding)
            torch.testing.assert_close(enc[-n:, i], one_enc[:, 0], atol=atol, rtol=rtol)
            torch.testing.assert_close(batched[i, : len(tgt) + 1], alone[0], atol=atol, rtol=rtol)


def check_incremental_equals_teacher_forced(model, d, atol, rtol=0.0):
    tokens, lengths, prev = (t.to(_device(model)) for t in random_batch(d, [6, 10, 4], [9, 9, 9], seed=1))
    with torch.no_grad():
        full = model(tokens, lengths, prev)[0]
    torch.testing.assert_close(decode_incrementally(model, tokens, lengths, prev), full, atol=atol, rtol=rtol)


def check_beam_reordering(model, d, atol, rtol=0.0):
    """Reorders as SequenceGenerator does: permutations within a sentence's beams,
    then finished sentences dropped; incremental logits follow the reordered
    histories exactly."""
    device = _device(model)
    g = torch.Generator().manual_seed(2)
    bsz, beam = 2, 2
    tokens, lengths = src_batch(random_sentences([7, 4], g, d), d.pad(), d.eos())
    beams = torch.arange(bsz).repeat_interleave(beam)
    prev = torch.cat([torch.full((bsz * beam, 1), d.eos()),
                      torch.randint(d.nspecial, len(d), (bsz * beam, 8), generator=g)], dim=1)
    reorders = {3: torch.tensor([1, 0, 3, 2]), 4: torch.tensor([1, 1, 2, 3]), 6: torch.tensor([2, 3])}
    steps = decode_steps(model, tokens[beams].to(device), lengths[beams].to(device), prev.to(device),
                         {t: order.to(device) for t, order in reorders.items()})
    assert [step.logits.size(0) for step in steps] == [4] * 6 + [2] * 3
    for t, step in enumerate(steps):
        with torch.no_grad():
            reference = model.decoder(step.prefix, encoder_out=step.encoder_out)[0][:, -1]
        torch.testing.assert_close(step.logits, reference, atol=atol, rtol=rtol, msg=lambda m: f"step {t}: {m}")


def check_finite_at_longest_length(model, d, site, decoder_steps=None):
    """No NaN/inf at the longest length the model accepts (at most 1024): the whole
    model teacher-forced, and, for a decoder self-attention mixer, the mixer alone
    stepped incrementally ``decoder_steps`` times (default: to that length)."""
    device, dtype = _device(model), next(model.parameters()).dtype
    max_src, max_tgt = (min(n, 1024) for n in model.max_positions())
    # Only the sides the mixer sees need the longest length.
    max_src = max_src if site != "decoder_self" else 8
    max_tgt = max_tgt if site != "encoder_self" else 8
    tokens, lengths, prev = (t.to(device) for t in random_batch(d, [max_src - 1, 5], [max_tgt - 1, 7], seed=3))
    with torch.no_grad():
        logits = model(tokens, lengths, prev)[0]
        assert torch.isfinite(logits).all(), f"non-finite logits in {dtype}"
        if site == "decoder_self":
            # Stepping the whole decoder 1024 times is slow; the mixer alone is
            # where step-dependent overflow would happen.
            steps = max_tgt if decoder_steps is None else min(max_tgt, decoder_steps)
            mixer = model.decoder.layers[0].self_attn
            x = torch.randn(steps, 2, mixer.embed_dim, generator=torch.Generator().manual_seed(4))
            finite = torch.isfinite(step_mixer(mixer, x.to(device=device, dtype=dtype))[0]).flatten(1).all(1)
            assert finite.all(), f"non-finite mixer output from step {int((~finite).nonzero()[0])} in {dtype}"


def copy_as(model, dtype=None, device=None):
    """A deep copy of a built model in ``dtype`` on ``device``, with its own decoding state."""
    import copy

    clone = copy.deepcopy(model).to(device=device, dtype=dtype)
    # deepcopy copies each module's incremental-state id; fresh ids keep the clone's
    # decoding state apart from the original's.
    for module in clone.modules():
        if hasattr(module, "init_incremental_state"):
            module.init_incremental_state()
    return clone


# One tiny preset per mechanism family, with the Transformer and the -SA ceiling:
# what the per-family tests (mixed-precision training, the e2e install check) run.
FAMILY_ARCHS = [
    "posnet_transformer_tiny",  # Transformer (mha everywhere)
    "transformer_nosa_tiny",  # -SA ceiling: no self-attention sub-layers
    "rposnet_transformer_tiny",
    "aposnet_transformer_tiny",
    "aan_plus_wet_tiny",
    "ssru_tiny",  # AAN+'s baselines
    "linear_attention_tiny",
    "hc_gaussian_shx_tiny",
    "tisa_transformer_tiny",
    "shaw_transformer_tiny",
    "relattn_transformer_tiny",
    "linearnet_transformer_tiny",
    "fouriernet_transformer_tiny",
    "lightconv_apptek_gated_transformer_tiny",
]
