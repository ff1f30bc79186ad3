"""The command line of ``posnet-compare``: its flags, and the checks argparse cannot make (errors name the flag)."""
import argparse
import math
import os
import shlex

from ..launcher.flags import add_arguments, slurm_options
from ..launcher.queues import QUEUES
from ..presets import suggest
from . import model_flags, seeds
from .devices import Cluster, cluster_plan, plan
from .model_flags import architecture, refused_name
from .recipe import Budget, Recipe

DEFAULT_TRAIN_MAX_LEN = 20
EXTRAPOLATION = 2.5  # the synthetic test set reaches this multiple of --train-max-len


def build_parser(description=None):
    p = argparse.ArgumentParser(prog="posnet-compare", description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", required=True, help="comma-separated architectures; the first is the baseline; "
                   "ARCH+LABEL is ARCH once more under another name, for other --arch-flags")
    p.add_argument("--out", required=True, help="output directory (re-use it to resume)")
    p.add_argument("--reuse-from", action="append", default=[], metavar="RUN",
                   help="an earlier run's --out: a model that finished there with the same data (by content), "
                   "recipe, budget, seed and flags is taken from it (its averaged checkpoint and training log "
                   "linked) instead of trained again (repeatable; the first run that has it)")
    p.add_argument("--delete-checkpoints", action="store_true",
                   help="after the report, delete the checkpoints of every compared model (gigabytes in a long run), "
                   "keeping its translations, training log and step records: a re-run, or one that adds seeds, "
                   "reports without them; one that must translate or measure such a model again says so")
    p.add_argument("--budget", default="5e",
                   help="training budget per model: 5e (epochs), 2000u (updates) or 20m (minutes of training "
                   "time), or converge:CAP: until the validation loss has not improved for --patience validations, "
                   "at most CAP (one of those; converge alone: converge:40e) (default: 5e)")
    p.add_argument("--patience", type=int,
                   help="with --budget converge: validations without a better validation loss that end a training "
                   "(fairseq's --patience) (10)")
    p.add_argument("--seeds", help="train every architecture once per seed: a count N (--seed, --seed + 1, ...) or "
                   "a comma-separated list (1,2,3); figures become mean ± sd over the seeds (default: --seed only)")
    p.add_argument("--model-flags", default="", help='fairseq flags for every architecture, e.g. "--dropout 0.3"')
    p.add_argument("--arch-flags", action="append", default=[], metavar="ARCH=FLAGS",
                   help='extra fairseq flags for one architecture (or ARCH+LABEL of --archs), e.g. '
                   '"glinearnet_transformer_tiny=--max-source-positions 128" (repeatable)')
    p.add_argument("--arch-generate-flags", action="append", default=[], metavar="ARCH=FLAGS",
                   help="extra fairseq-generate flags for one architecture (or ARCH+LABEL) when it translates the "
                   "test set and when its decoding is timed, e.g. a RoPE scaling as --model-overrides; a model whose "
                   "architecture, seed and training flags are an earlier model's shares that training (repeatable)")
    _data_flags(p.add_argument_group("data (default: the synthetic corpus)"))
    _recipe_flags(p.add_argument_group("the shared recipe"))
    _evaluation_flags(p.add_argument_group("evaluation"))
    p.add_argument("--progress-every", type=float, default=30, help="seconds between progress lines (30)")
    p.add_argument("--launcher", choices=["local", "slurm"], default="local",
                   help="local: models train and translate in processes of this machine (default); slurm: each "
                   "model's training, and then its translation, is a SLURM job (docs/cluster.md)")
    add_arguments(p)
    return p


def _data_flags(data):
    source = data.add_mutually_exclusive_group()
    source.add_argument("--data", metavar="DATA_BIN", help="a fairseq data-bin, used as it is")
    source.add_argument("--raw", nargs=2, metavar=("SRC", "TGT"),
                        help="plain parallel text files, one sentence per line (split, SentencePiece, binarized here)")
    data.add_argument("--raw-valid", nargs=2, metavar=("SRC", "TGT"),
                      help="with --raw: your own validation files (else --valid pairs are drawn from --raw)")
    data.add_argument("--raw-test", nargs=2, metavar=("SRC", "TGT"),
                      help="with --raw: your own test files (else --test pairs are drawn from --raw)")
    data.add_argument("--post-process", help="with --data: how its text was segmented (fairseq-generate's "
                      "--post-process: sentencepiece, subword_nmt, ...; 'none' for none)")
    data.add_argument("--train-max-len", type=int,
                      help=f"longest training pair, tokens per side (synthetic: default {DEFAULT_TRAIN_MAX_LEN}; "
                      "--raw: SentencePiece pieces, default no limit)")
    data.add_argument("--test-max-len", type=int,
                      help=f"synthetic: longest test source (default {EXTRAPOLATION} x --train-max-len)")
    data.add_argument("--concat-test", type=int, metavar="K",
                      help="also test on examples of K consecutive test pairs joined (sources and references), "
                      "scored in length buckets of their own, marked as concatenated (synthetic, --raw)")
    data.add_argument("--buckets", type=int, default=5, help="synthetic: source-length buckets of the test set (5)")
    data.add_argument("--train-pairs", type=int, default=20000, help="synthetic: training pairs (20000)")
    data.add_argument("--valid", type=int, default=300, help="validation pairs (synthetic, --raw) (300)")
    data.add_argument("--test", type=int, default=500, help="test pairs (synthetic, --raw) (500)")
    data.add_argument("--vocab-size", type=int, help="SentencePiece pieces (synthetic: 1000, --raw: 8000)")


def _recipe_flags(recipe):
    recipe.add_argument("--seed", type=int, default=Recipe.seed,
                        help=f"seed of the data (synthetic corpus, splits) and of the first training ({Recipe.seed})")
    recipe.add_argument("--seed-offset", action="append", default=[], metavar="NAME=N",
                        help="NAME (one of --archs) trains with every seed + N (N >= 1), keeping its names, and shares "
                        "no training with a model of other seeds (an A/A check: --archs ARCH,ARCH+aa --seed-offset "
                        "ARCH+aa=3) (repeatable)")
    recipe.add_argument("--lr", type=float, default=Recipe.lr)
    recipe.add_argument("--warmup-updates", type=int, default=Recipe.warmup_updates)
    recipe.add_argument("--max-tokens", type=int, default=Recipe.max_tokens)
    recipe.add_argument("--dropout", type=float, default=Recipe.dropout)
    recipe.add_argument("--concat-train", metavar="K[,RATE]",
                        help="train every model on the training pairs plus examples of 2..K concatenated pairs, "
                             "RATE their share (--task translation_concat; docs/length-generalisation.md)")
    recipe.add_argument("--interval", type=int, default=Recipe.interval,
                        help=f"updates between validations and checkpoints ({Recipe.interval})")
    recipe.add_argument("--average", type=int, default=Recipe.average,
                        help=f"last checkpoints averaged ({Recipe.average})")
    recipe.add_argument("--jobs", type=int, help="models trained at once: on CPU one core each (default: the cores), "
                        "with CUDA one GPU each (default: the GPUs)")
    recipe.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="where models train and translate (auto: the GPUs when torch sees any, else the CPU)")
    recipe.add_argument("--no-fp16", action="store_true", help="on a GPU, train in fp32 (default: --fp16)")


def _evaluation_flags(evaluation):
    evaluation.add_argument("--beam", type=int, default=5, help="test translation beam (5)")
    evaluation.add_argument("--batch-size", type=int, default=64, help="test translation batch (64)")
    evaluation.add_argument("--max-len-a", type=float, default=2.0,
                            help="test translations stop at a x source length + b tokens (a = 2)")
    evaluation.add_argument("--max-len-b", type=int, default=10, help="(b = 10)")
    evaluation.add_argument("--bootstrap-samples", type=int, default=1000)
    evaluation.add_argument("--min-bucket-sentences", type=int, default=30,
                            help="a source-length bucket with fewer test sentences is merged into its neighbour "
                            "on the same side of the training lengths, or else marked too small to score (30)")
    evaluation.add_argument("--decode-lengths", default="30,80,200",
                            help="forced output lengths for the decoding speed (30,80,200)")
    evaluation.add_argument("--decode-sentences", type=int, default=32, help="sentences decoded per timing (32)")
    evaluation.add_argument("--decode-beam", type=int, default=4)
    evaluation.add_argument("--decode-batch", type=int, default=32)
    evaluation.add_argument("--decode-rounds", type=int, default=3)
    evaluation.add_argument("--step-rounds", type=int, default=2, help="training-step measurements per model (2)")
    evaluation.add_argument("--timed-steps", type=int, default=3, help="timed training steps per measurement (3)")


def check_args(p, args):
    """Parses and validates what argparse cannot; errors name the flag."""
    _check_archs(p, args)
    _check_out(p, args.out)
    _check_model_flags(p, args)
    _check_seed_offsets(p, args)
    _check_budget(p, args)
    _check_data(p, args)
    _check_measuring(p, args)
    return args


def _check_archs(p, args):
    args.arch_list = [a.strip() for a in args.archs.split(",") if a.strip()]
    if not args.arch_list:
        p.error("--archs: no architecture given")
    for run in args.reuse_from:
        if os.path.abspath(run) == os.path.abspath(args.out):
            p.error(f"--reuse-from {run}: that is --out itself (a run resumes its own models without it)")
        if not os.path.isdir(os.path.join(run, "steps")):
            p.error(f"--reuse-from {run}: not a posnet-compare run (no {os.path.join(run, 'steps')})")
    if len(set(args.arch_list)) != len(args.arch_list):
        p.error(f"--archs {args.archs}: an architecture is listed twice")
    from fairseq.models import ARCH_MODEL_REGISTRY

    from .. import models  # noqa: F401  (registers the architectures)

    refused = [why for why in map(refused_name, args.arch_list) if why]
    unknown = [architecture(a) for a in args.arch_list if architecture(a) not in ARCH_MODEL_REGISTRY]
    if refused or unknown:
        p.error("--archs: " + "; ".join(refused + [f"unknown architecture {a}{suggest(a, ARCH_MODEL_REGISTRY)}"
                                                   for a in unknown]))


def _check_model_flags(p, args):
    args.flags = {arch: shlex.split(args.model_flags) for arch in args.arch_list}
    for spec in args.arch_flags:
        arch, sep, flags = spec.partition("=")
        if not sep or arch not in args.flags:
            p.error(f"--arch-flags {spec!r}: expected ARCH=FLAGS with ARCH one of --archs")
        args.flags[arch] += shlex.split(flags)
    args.generate_flags = {arch: [] for arch in args.arch_list}
    for spec in args.arch_generate_flags:
        arch, sep, flags = spec.partition("=")
        if not sep or arch not in args.generate_flags:
            p.error(f"--arch-generate-flags {spec!r}: expected ARCH=FLAGS with ARCH one of --archs")
        args.generate_flags[arch] += shlex.split(flags)
        unknown = _unknown_generate_flags(args.generate_flags[arch])
        if unknown:
            p.error(f"--arch-generate-flags {spec!r}: fairseq-generate has no flag {' '.join(unknown)} (a model "
                    "flag is given at generation as --model-overrides \"{'rope_scaling': 'yarn', ...}\")")


def _check_seed_offsets(p, args):
    """--seed-offset NAME=N as {NAME: N} (NAME one of --archs, N >= 1, once per NAME)."""
    args.seed_offsets = {}
    for spec in args.seed_offset:
        name, sep, number = spec.partition("=")
        if not sep or name not in args.arch_list or not number.strip().isdigit() or int(number) < 1:
            p.error(f"--seed-offset {spec!r}: expected NAME=N with NAME one of --archs and N an integer >= 1")
        if name in args.seed_offsets:
            p.error(f"--seed-offset {spec!r}: {name} is given an offset twice")
        args.seed_offsets[name] = int(number)


def _check_budget(p, args):
    args.train_task_flags = _concat_train_flags(p, args.concat_train)
    if args.patience is not None and args.patience < 1:
        p.error(f"--patience {args.patience}: must be at least 1")
    try:
        args.budget_obj = Budget.parse(args.budget, args.patience)
        args.seed_list = seeds.parse(args.seeds, args.seed) if args.seeds else [args.seed]
    except ValueError as err:
        p.error(str(err))


def _check_data(p, args):
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
    if args.concat_test is not None and args.mode == "data":
        p.error("--concat-test joins raw test text: a --data data-bin has none; use --raw with --raw-test (or "
                "the synthetic corpus)")
    if args.concat_test is not None and args.concat_test < 2:
        p.error(f"--concat-test {args.concat_test}: must be at least 2 (K consecutive test pairs make one example)")
    args.raw_given = {}
    for split in ("valid", "test"):
        files = getattr(args, f"raw_{split}")
        if files and args.mode != "raw":
            p.error(f"--raw-{split} gives your own {split} files for --raw")
        if files:
            args.raw_given[split] = list(files)
    if args.mode == "raw":
        for flag, paths in (("--raw", args.raw), *((f"--raw-{s}", f) for s, f in args.raw_given.items())):
            for path in paths:
                if not os.path.isfile(path):
                    p.error(f"{flag}: no such file {path}")
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


def _check_measuring(p, args):
    try:
        args.lengths = [int(n) for n in args.decode_lengths.split(",") if n.strip()]
    except ValueError:
        p.error(f"--decode-lengths {args.decode_lengths!r}: expected comma-separated integers")
    if not args.lengths or min(args.lengths) < 1:
        p.error(f"--decode-lengths {args.decode_lengths!r}: need positive lengths")
    for flag in ("interval", "average", "beam", "batch_size", "decode_sentences", "decode_rounds", "step_rounds",
                 "timed_steps", "bootstrap_samples", "valid", "test", "train_pairs", "min_bucket_sentences"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be at least 1")
    if args.jobs is not None and args.jobs < 1:
        p.error("--jobs must be at least 1")
    try:
        args.plan = plan(args.device, args.jobs, fp16=not args.no_fp16) if args.launcher == "local" \
            else _cluster_plan(p, args)
    except ValueError as err:
        p.error(str(err))
    errors, args.model_limits = model_flags.check(args.flags, args.generate_flags)
    if errors:
        p.error("model flags refused (nothing was prepared): "
                + "; ".join(f"{arch}: {why}" for arch, why in errors.items()) + "; fix them in --model-flags or "
                "--arch-flags")


def _unknown_generate_flags(flags):
    """The flags of ``flags`` that fairseq-generate (with the plugin's) does not know."""
    from fairseq import options as fairseq_options

    parser = fairseq_options.get_generation_parser(default_task="translation")
    _, unknown = parser.parse_known_args(["data-bin", *flags])
    return [flag for flag in unknown if flag.startswith("-")]


def _concat_train_flags(p, spec):
    """--concat-train K[,RATE] as the training task's flags (none without it)."""
    if spec is None:
        return []
    from ..tasks import translation_concat

    k, _, rate = spec.partition(",")
    try:
        k, rate = int(k), float(rate) if rate else translation_concat.TranslationConcatConfig.concat_rate
    except ValueError:
        p.error(f"--concat-train {spec}: expected K[,RATE], e.g. 3 or 3,0.5")
    refused = translation_concat.check(k, rate)
    if refused:
        p.error(f"--concat-train {spec}: {refused}")
    return translation_concat.train_flags(k, rate)


def _cluster_plan(p, args):
    """The plan of --launcher slurm: one job per model, with the job flags' resources."""
    if args.jobs is not None:
        p.error("--jobs: with --launcher slurm every model is a job of its own, and SLURM decides how many run "
                "at once")
    if args.device != "auto":
        p.error(f"--device {args.device}: with --launcher slurm the jobs' resources say where models train "
                "(--gpus-per-job)")
    options = slurm_options(p, args)
    try:
        QUEUES["slurm"](options)
    except RuntimeError as err:
        p.error(f"--launcher slurm: {err}")
    return cluster_plan(Cluster(os.path.join(os.path.abspath(args.out), "slurm"), options,
                                poll_seconds=args.poll_seconds), len(args.arch_list), fp16=not args.no_fp16)


def _check_out(p, out):
    """--out must be a directory or a path one can create: the error names the path and the fix."""
    if os.path.exists(out) and not os.path.isdir(out):
        p.error(f"--out {out} is a file, not a directory; give a new path (or an earlier run's directory)")
    parent = os.path.dirname(os.path.abspath(out))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        p.error(f"--out {out}: {parent} is a file, not a directory; give a path under a directory")


