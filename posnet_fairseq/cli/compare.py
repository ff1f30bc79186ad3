"""``posnet-compare``: which position mechanism, at what cost, from one run.

    posnet-compare --archs A,B,... [--data DATA_BIN --post-process SPM | --raw SRC TGT] \\
        [--budget 5e|2000u|20m] [--train-max-len L] --out DIR

Trains every architecture with the same seed, optimiser and budget (side by
side, one core each), translates the test set, and writes ``DIR/results.md``
(one table), ``DIR/results.csv`` and ``DIR/plots/*.png``:

* quality: sacreBLEU BLEU and chrF with signatures, 95% bootstrap confidence
  intervals and paired significance against the first architecture;
* length generalisation: BLEU per source-length bucket, buckets beyond the
  training lengths marked. The default synthetic corpus trains on pairs of at
  most ``--train-max-len`` tokens (20) and tests up to 2.5 times that;
  with ``--raw``, ``--train-max-len`` filters the training pairs and the
  longer test sentences form the extrapolation buckets;
* cost: parameters (and after PosNet precomputation), training tokens/s and
  step memory, decoding speed at forced output lengths, as ratios to the
  first architecture measured in the same run;
* plots: BLEU vs decoding speed, BLEU by length, validation loss vs updates
  and vs wall time, each model's mean self-attention weight by position
  offset (``posnet-analyze``'s figures per model under ``DIR/analysis/``).

Re-running the same command skips what is finished (the log says
"skipped") and resumes an interrupted training from its last checkpoint.
See docs/compare.md.
"""
import argparse
import datetime
import json
import math
import os
import shlex
import signal
import sys

DEFAULT_TRAIN_MAX_LEN = 20
EXTRAPOLATION = 2.5  # the synthetic test set reaches this multiple of --train-max-len


def build_parser():
    p = argparse.ArgumentParser(prog="posnet-compare", description=__doc__.split("\n\n")[0].split(": ", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", required=True, help="comma-separated architectures; the first is the baseline")
    p.add_argument("--out", required=True, help="output directory (re-use it to resume)")
    p.add_argument("--budget", default="5e",
                   help="training budget per model: 5e (epochs), 2000u (updates) or 20m (minutes of training "
                   "time) (default: 5e)")
    p.add_argument("--model-flags", default="", help='fairseq flags for every architecture, e.g. "--dropout 0.3"')
    p.add_argument("--arch-flags", action="append", default=[], metavar="ARCH=FLAGS",
                   help='extra fairseq flags for one architecture, e.g. '
                   '"glinearnet_transformer_tiny=--max-source-positions 128" (repeatable)')
    data = p.add_argument_group("data (default: the synthetic corpus)")
    source = data.add_mutually_exclusive_group()
    source.add_argument("--data", metavar="DATA_BIN", help="a fairseq data-bin, used as it is")
    source.add_argument("--raw", nargs=2, metavar=("SRC", "TGT"),
                        help="plain parallel text files, one sentence per line (split, SentencePiece, binarized here)")
    data.add_argument("--post-process", help="with --data: how its text was segmented (fairseq-generate's "
                      "--post-process: sentencepiece, subword_nmt, ...; 'none' for none)")
    data.add_argument("--train-max-len", type=int,
                      help=f"longest training pair, tokens per side (synthetic: default {DEFAULT_TRAIN_MAX_LEN}; "
                      "--raw: SentencePiece pieces, default no limit)")
    data.add_argument("--test-max-len", type=int,
                      help=f"synthetic: longest test source (default {EXTRAPOLATION} x --train-max-len)")
    data.add_argument("--buckets", type=int, default=5, help="synthetic: source-length buckets of the test set (5)")
    data.add_argument("--train-pairs", type=int, default=20000, help="synthetic: training pairs (20000)")
    data.add_argument("--valid", type=int, default=300, help="validation pairs (synthetic, --raw) (300)")
    data.add_argument("--test", type=int, default=500, help="test pairs (synthetic, --raw) (500)")
    data.add_argument("--vocab-size", type=int, help="SentencePiece pieces (synthetic: 1000, --raw: 8000)")
    recipe = p.add_argument_group("the shared recipe")
    recipe.add_argument("--seed", type=int, default=1)
    recipe.add_argument("--lr", type=float, default=0.002)
    recipe.add_argument("--warmup-updates", type=int, default=200)
    recipe.add_argument("--max-tokens", type=int, default=2048)
    recipe.add_argument("--dropout", type=float, default=0.1)
    recipe.add_argument("--interval", type=int, default=50, help="updates between validations and checkpoints (50)")
    recipe.add_argument("--average", type=int, default=3, help="last checkpoints averaged (3)")
    recipe.add_argument("--jobs", type=int, help="models trained at once, one core each (default: the cores)")
    evaluation = p.add_argument_group("evaluation")
    evaluation.add_argument("--beam", type=int, default=5, help="test translation beam (5)")
    evaluation.add_argument("--batch-size", type=int, default=64, help="test translation batch (64)")
    evaluation.add_argument("--max-len-a", type=float, default=2.0,
                            help="test translations stop at a x source length + b tokens (a = 2)")
    evaluation.add_argument("--max-len-b", type=int, default=10, help="(b = 10)")
    evaluation.add_argument("--bootstrap-samples", type=int, default=1000)
    evaluation.add_argument("--decode-lengths", default="30,80,200",
                            help="forced output lengths for the decoding speed (30,80,200)")
    evaluation.add_argument("--decode-sentences", type=int, default=32, help="sentences decoded per timing (32)")
    evaluation.add_argument("--decode-beam", type=int, default=4)
    evaluation.add_argument("--decode-batch", type=int, default=32)
    evaluation.add_argument("--decode-rounds", type=int, default=3)
    evaluation.add_argument("--step-rounds", type=int, default=2, help="training-step measurements per model (2)")
    evaluation.add_argument("--timed-steps", type=int, default=3, help="timed training steps per measurement (3)")
    p.add_argument("--progress-every", type=float, default=30, help="seconds between progress lines (30)")
    return p


def check_args(p, args):
    """Parses and validates what argparse cannot; errors name the flag."""
    from ..compare.training import Budget

    args.arch_list = [a.strip() for a in args.archs.split(",") if a.strip()]
    if not args.arch_list:
        p.error("--archs: no architecture given")
    if len(set(args.arch_list)) != len(args.arch_list):
        p.error(f"--archs {args.archs}: an architecture is listed twice")
    from fairseq.models import ARCH_MODEL_REGISTRY

    import posnet_fairseq  # noqa: F401  (registers the architectures)

    unknown = [a for a in args.arch_list if a not in ARCH_MODEL_REGISTRY]
    if unknown:
        p.error(f"--archs: unknown architecture(s) {', '.join(unknown)}")
    args.flags = {arch: shlex.split(args.model_flags) for arch in args.arch_list}
    for spec in args.arch_flags:
        arch, sep, flags = spec.partition("=")
        if not sep or arch not in args.flags:
            p.error(f"--arch-flags {spec!r}: expected ARCH=FLAGS with ARCH one of --archs")
        args.flags[arch] += shlex.split(flags)
    try:
        args.budget_obj = Budget.parse(args.budget)
    except ValueError as err:
        p.error(str(err))
    args.mode = "data" if args.data else "raw" if args.raw else "synthetic"
    if args.mode == "data":
        if not args.post_process:
            p.error("--data needs --post-process: how the data-bin's text was segmented "
                    "(sentencepiece, subword_nmt, ... or none)")
        if args.train_max_len is not None:
            p.error("--train-max-len filters the training pairs of --raw or the synthetic corpus; "
                    "a --data data-bin is used as it is")
        if args.post_process == "none":
            args.post_process = None
    elif args.post_process:
        p.error("--post-process goes with --data (--raw and the synthetic corpus use SentencePiece)")
    if args.mode == "raw":
        for path in args.raw:
            if not os.path.isfile(path):
                p.error(f"--raw: no such file {path}")
    if args.mode == "synthetic":
        args.train_max_len = args.train_max_len or DEFAULT_TRAIN_MAX_LEN
        args.test_max_len = args.test_max_len or math.ceil(EXTRAPOLATION * args.train_max_len)
        if args.test_max_len <= args.train_max_len:
            p.error(f"--test-max-len {args.test_max_len} must exceed --train-max-len {args.train_max_len}")
    elif args.test_max_len is not None:
        p.error("--test-max-len shapes the synthetic test set; with --raw the test sentences are what they are")
    if args.train_max_len is not None and args.train_max_len < 10:
        p.error(f"--train-max-len {args.train_max_len}: must be at least 10")
    args.vocab_size = args.vocab_size or (1000 if args.mode == "synthetic" else 8000)
    try:
        args.lengths = [int(n) for n in args.decode_lengths.split(",") if n.strip()]
    except ValueError:
        p.error(f"--decode-lengths {args.decode_lengths!r}: expected comma-separated integers")
    if not args.lengths or min(args.lengths) < 1:
        p.error(f"--decode-lengths {args.decode_lengths!r}: need positive lengths")
    for flag in ("interval", "average", "beam", "batch_size", "decode_sentences", "decode_rounds", "step_rounds",
                 "timed_steps", "bootstrap_samples", "valid", "test", "train_pairs"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be at least 1")
    args.jobs = args.jobs or len(os.sched_getaffinity(0))
    return args


class Log:
    """Prints a line with the time and appends it to OUT/compare.log."""

    def __init__(self, out_dir):
        self.path = os.path.join(out_dir, "compare.log")

    def __call__(self, message):
        line = f"[posnet-compare {datetime.datetime.now():%H:%M:%S}] {message}"
        print(line, flush=True)
        with open(self.path, "a") as f:
            f.write(line + "\n")


def check_settings(out_dir, recipe, flags):
    """OUT/compare.json keeps the shared recipe of the first run and each model's flags: a re-run may
    add models, but not change the recipe or a trained model's flags (it would not be comparable)."""
    path = os.path.join(out_dir, "compare.json")
    before = _load_json(path)
    if before is not None:
        changed = sorted(k for k in set(before["recipe"]) | set(recipe)
                         if before["recipe"].get(k) != recipe.get(k))
        changed += [f"flags of {a}" for a, f in flags.items() if before["flags"].get(a, f) != f]
        if changed:
            raise ValueError(f"{out_dir} was made with other settings ({', '.join(changed)}): its models would "
                             f"not be comparable with new ones; use a new --out")
        flags = dict(before["flags"], **flags)
    _save_json(path, {"recipe": recipe, "flags": flags})


def _load_json(path):
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return None


def _save_json(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f, indent=1)
    os.replace(path + ".tmp", path)


def measure_cost(args, info, trained, limits, log):
    """OUT/cost.json, measured again only when the set of models or the measuring settings change."""
    from ..compare import cost, data

    path = os.path.join(args.out, "cost.json")
    step_length = args.train_max_len or 32
    settings = {"archs": list(trained), "decode_lengths": args.lengths, "decode_sentences": args.decode_sentences,
                "decode_beam": args.decode_beam, "decode_batch": args.decode_batch,
                "decode_rounds": args.decode_rounds, "step_rounds": args.step_rounds,
                "timed_steps": args.timed_steps, "step_length": step_length,
                "step_batch": max(1, args.max_tokens // step_length)}
    previous = _load_json(path)
    if previous is not None and previous["settings"] == settings:
        log(f"cost: skipped, measured earlier ({path})")
        return previous
    log("cost: parameters")
    parameters = {arch: cost.parameters(path_, info["data_bin"]) for arch, path_ in trained.items()}
    log(f"cost: training steps ({settings['step_batch']} x {step_length} tokens, {args.step_rounds} rounds)")
    steps = cost.training_steps(list(trained), args.flags, info["vocab"], settings["step_batch"], step_length,
                                args.step_rounds, args.timed_steps, log)
    log(f"cost: decoding speed at output lengths {args.lengths} ({args.decode_rounds} rounds)")
    speed_bin = data.write_speed_set(info["data_bin"], args.out, args.decode_sentences, info["source_lang"],
                                     info["target_lang"])
    decoding = cost.decoding(trained, limits, speed_bin, args.lengths, args.decode_rounds,
                             os.path.join(args.out, "gen", "speed"), (info["source_lang"], info["target_lang"]),
                             args.decode_beam, args.decode_batch, log)
    precompute_lengths = {p["precompute_length"] for p in parameters.values() if p.get("precompute_length")}
    result = {"settings": settings, "parameters": parameters, "training_steps": steps,
              "decoding": {arch: {str(n): v for n, v in per.items()} for arch, per in decoding.items()},
              "decode_lengths": args.lengths, "decode_sentences": args.decode_sentences,
              "decode_beam": args.decode_beam, "decode_batch": args.decode_batch,
              "decode_rounds": args.decode_rounds, "step_rounds": args.step_rounds, "timed_steps": args.timed_steps,
              "step_length": step_length, "step_batch": settings["step_batch"],
              "precompute_length": ", ".join(map(str, sorted(precompute_lengths))) or None}
    _save_json(path, result)
    return result


def analyse(args, info, trained, log):
    """posnet-analyze's figures and numbers per model (OUT/analysis/ARCH/), its Toeplitz R^2 per
    position table ({arch: {side: R^2}}), and each model's position-mixing profiles
    (OUT/analysis/ARCH/mixing.json, posnet_fairseq.compare.mixing)."""
    import contextlib
    import io

    from fairseq import checkpoint_utils

    from .. import analysis
    from ..compare import mixing
    from . import analyze

    max_positions = max(b[1] for b in info["buckets"])
    profiles, r2s = {}, {}
    for arch, checkpoint in trained.items():
        out = os.path.join(args.out, "analysis", arch)
        report = os.path.join(out, "analyze.txt")
        profile_path = os.path.join(out, "mixing.json")
        if os.path.exists(profile_path) and os.path.getmtime(profile_path) >= os.path.getmtime(checkpoint):
            log(f"analysis: skipped {arch}, analysed earlier ({out})")
            profiles[arch] = _load_json(profile_path)
        else:
            log(f"analysis: {arch}")
            os.makedirs(out, exist_ok=True)
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                analyze.main([checkpoint, "--out-dir", out, "--max-positions", str(max_positions)])
            with open(report, "w") as f:
                f.write(text.getvalue())
            profiles[arch] = mixing.offset_profiles(checkpoint, info["data_bin"])
            _save_json(profile_path, profiles[arch])
        state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
        r2s[arch] = {name.split(".")[0]: analysis.toeplitz_r2(analysis.position_gram(table))
                     for name, (_, table) in analysis.position_tables(state["model"], state["cfg"]["model"],
                                                                       max_positions).items()}
    return profiles, r2s


def _interrupt(signum, frame):
    # SIGTERM unwinds like Ctrl-C, so running trainings and translations are stopped, not orphaned.
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None):
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return run(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(argv):
    p = build_parser()
    args = check_args(p, p.parse_args(argv))
    os.makedirs(args.out, exist_ok=True)
    log = Log(args.out)
    log(f"posnet-compare {' '.join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))}")

    from ..compare import data, plots, quality, report, training

    recipe = training.Recipe(seed=args.seed, lr=args.lr, warmup_updates=args.warmup_updates,
                             max_tokens=args.max_tokens, dropout=args.dropout, interval=args.interval,
                             average=args.average)
    try:
        check_settings(args.out, {"budget": str(args.budget_obj), **vars(recipe), "model_flags": args.model_flags,
                                  "beam": args.beam, "max_len": [args.max_len_a, args.max_len_b]}, args.flags)
    except ValueError as err:
        p.error(str(err))
    try:
        info = data.prepare(args.out, args.mode, log, raw=args.raw, data_bin=args.data,
                            post_process=args.post_process, train_max_len=args.train_max_len,
                            test_max_len=args.test_max_len, n_buckets=args.buckets, synth_train=args.train_pairs,
                            valid=args.valid, test=args.test, vocab_size=args.vocab_size, seed=args.seed)
    except (ValueError, FileNotFoundError) as err:
        p.error(str(err))
    train_limit = info["train_max_len"] or info["longest_train"]

    trainer = training.Trainer(args.out, info["data_bin"], args.budget_obj, recipe, args.jobs, log,
                               args.progress_every)
    log(f"train: {len(args.arch_list)} models, {args.budget_obj} each, {args.jobs} at a time")
    outcomes = trainer.run(args.arch_list, args.flags)
    trained = {a: outcomes[a]["checkpoint"] for a in args.arch_list if "checkpoint" in outcomes[a]}
    if not trained:
        log("every training failed; see the logs in " + trainer.dir)
        return 1

    failed = quality.translate_all(trained, info, args.out, args.jobs,
                                   ["--beam", str(args.beam), "--batch-size", str(args.batch_size),
                                    "--max-len-a", repr(args.max_len_a), "--max-len-b", str(args.max_len_b)], log)
    translated = {a: c for a, c in trained.items() if a not in failed}
    limits = {arch: quality.model_limits(checkpoint) for arch, checkpoint in trained.items()}
    src_tokens, tgt_tokens = quality.token_lengths(info)
    outputs, t_lines = {}, [None] * len(src_tokens)
    for arch in translated:
        hyps, refs, skipped = quality.read_output(os.path.join(args.out, "gen", f"{arch}.out"), len(src_tokens))
        outputs[arch] = (hyps, skipped)
        t_lines = [t if t is not None else r for t, r in zip(t_lines, refs)]
    scored = [a for a in args.arch_list if a in outputs]
    log(f"quality: sacreBLEU with {args.bootstrap_samples} bootstrap resamples")
    quality_result = quality.score(scored, outputs, [r or "" for r in quality.references(info, t_lines)],
                                   info["test_lengths"], src_tokens, tgt_tokens, limits,
                                   [tuple(b) for b in info["buckets"]], train_limit,
                                   force=args.mode == "synthetic", samples=args.bootstrap_samples)
    quality_result["length_unit"] = info["length_unit"]
    quality_result["failed"] = failed
    _save_json(os.path.join(args.out, "quality.json"), quality_result)

    cost_result = measure_cost(args, info, translated, limits, log)
    profiles, r2s = analyse(args, info, translated, log)
    curves = {arch: training.valid_curve(trainer.log_path(arch)) for arch in args.arch_list
              if os.path.exists(trainer.log_path(arch))}

    context = {
        "command": "`posnet-compare " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
        + "`",
        "data": describe_data(args, info),
        "budget": f"{args.budget_obj} per model; seed {args.seed}; Adam (0.9, 0.98), lr {args.lr:g}, inverse-sqrt "
                  f"schedule with {args.warmup_updates} warm-up updates, label smoothing 0.1, dropout "
                  f"{args.dropout:g}, at most {args.max_tokens} tokens per batch; evaluated: the average of the last "
                  f"{args.average} {'epoch' if args.budget_obj.unit == 'epochs' else 'update'} checkpoints "
                  f"(saved every {args.interval} updates)" + (f"; model flags {args.model_flags}" if args.model_flags
                                                              else ""),
        "trained": ", ".join(f"`{a}` {o.get('updates', '?')} updates" for a, o in outcomes.items()
                             if "checkpoint" in o),
        "test translation": f"fairseq-generate, beam {args.beam}, at most {args.max_len_a:g} x source length + "
                            f"{args.max_len_b} tokens",
        "baseline (ratios, significance)": f"`{args.arch_list[0]}`",
    }
    extra = {a: f for a, f in args.flags.items() if f and f != shlex.split(args.model_flags)}
    if extra:
        context["per-model flags"] = "; ".join(f"`{a}`: `{' '.join(f)}`" for a, f in extra.items())
    table, text = report.write(args.out, scored, {a: outcomes[a] for a in args.arch_list}, quality_result,
                               cost_result, r2s, context)
    plot_dir = os.path.join(args.out, "plots")
    os.makedirs(plot_dir, exist_ok=True)
    plots.bleu_vs_speed(table, args.lengths[0], args.arch_list[0], os.path.join(plot_dir, "bleu_vs_speed.png"))
    plots.bleu_by_length(table, quality_result["buckets"], train_limit, info["length_unit"],
                         os.path.join(plot_dir, "bleu_by_length.png"))
    plots.valid_loss(args.arch_list, curves, os.path.join(plot_dir, "valid_loss.png"))
    plots.position_mixing(scored, profiles, os.path.join(plot_dir, "position_mixing.png"))
    _save_json(os.path.join(args.out, "results.json"), {"table": table, "buckets": quality_result["buckets"],
                                                        "train_limit": train_limit, "curves": curves,
                                                        "mixing": profiles,
                                                        "decode_lengths": args.lengths})
    log(f"wrote {args.out}/results.md, results.csv, plots/*.png")
    print(text)
    return 0


def describe_data(args, info):
    b = info["buckets"]
    if args.mode == "synthetic":
        return (f"synthetic corpus (`posnet-synth`, seed {args.seed}): {info['train_pairs']} training pairs of at "
                f"most {args.train_max_len} words per side; test set of {info['test_sentences']} sentences, source "
                f"lengths {b[0][0]}-{b[-1][1]} in {len(b)} buckets of equal size; SentencePiece "
                f"{info['vocab']} types (joined dictionary)")
    if args.mode == "raw":
        return (f"{args.raw[0]} / {args.raw[1]}: {info['train_pairs']} training pairs"
                + (f" of at most {args.train_max_len} pieces per side" if args.train_max_len else "")
                + f", test {info['test_sentences']} sentences; SentencePiece {info['vocab']} types")
    return (f"data-bin {info['data_bin']} ({info['train_pairs']} training pairs, test {info['test_sentences']} "
            f"sentences), scored on fairseq's post-processed references ({args.post_process or 'none'})")


if __name__ == "__main__":
    sys.exit(main())
