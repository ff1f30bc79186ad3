"""One ``posnet-compare`` run from its checked arguments: data, training, translation, scores, cost, analysis,
report and plots, each step skipped when a previous run finished it (see docs/compare.md)."""
import datetime
import json
import os
import shlex
import sys

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


def measure_cost(args, info, trained, limits, train_logs, log):
    """OUT/cost.json, measured again only when the set of models or the measuring settings change. On a GPU
    (``args.plan``) decoding is timed there and the training speed is fairseq-train's own on its GPU
    (``train_logs``: {arch: its log}); see :mod:`posnet_fairseq.compare.devices`."""
    from . import cost, data

    path = os.path.join(args.out, "cost.json")
    step_length = args.train_max_len or 32
    settings = {"archs": list(trained), "decode_lengths": args.lengths, "decode_sentences": args.decode_sentences,
                "decode_beam": args.decode_beam, "decode_batch": args.decode_batch,
                "decode_rounds": args.decode_rounds, "step_rounds": args.step_rounds,
                "timed_steps": args.timed_steps, "step_length": step_length,
                "step_batch": max(1, args.max_tokens // step_length)}
    gpu = args.plan.device == "cuda"
    if gpu:
        settings.update(device=args.plan.name, fp16=args.plan.fp16)
    langs = (info["source_lang"], info["target_lang"])

    def arithmetic(speed_bin):
        log(f"cost: FLOPs per generated token at output lengths {args.lengths}")
        counted = cost.decoding_flops(trained, limits, speed_bin, args.lengths, langs, args.decode_beam)
        return {arch: {str(n): v for n, v in per.items()} for arch, per in counted.items()}

    previous = _load_json(path)
    if previous is not None and previous["settings"] == settings:
        log(f"cost: skipped, measured earlier ({path})")
        if "decoding_flops" not in previous:  # measured before the ceilings were reported
            previous["decoding_flops"] = arithmetic(data.write_speed_set(info["data_bin"], args.out,
                                                                         args.decode_sentences, *langs))
            _save_json(path, previous)
        return previous
    log("cost: parameters")
    parameters = {arch: cost.parameters(path_, info["data_bin"]) for arch, path_ in trained.items()}
    log(f"cost: training steps ({settings['step_batch']} x {step_length} tokens, {args.step_rounds} rounds)")
    steps = cost.training_steps(list(trained), args.flags, info["vocab"], settings["step_batch"], step_length,
                                args.step_rounds, args.timed_steps, log)
    if gpu:
        for arch, log_path in train_logs.items():
            if arch in steps:
                steps[arch]["tokens_per_s"] = cost.logged_training_speed(log_path)
    log(f"cost: decoding speed at output lengths {args.lengths} ({args.decode_rounds} rounds)")
    speed_bin = data.write_speed_set(info["data_bin"], args.out, args.decode_sentences, *langs)
    decoding = cost.decoding(trained, limits, speed_bin, args.lengths, args.decode_rounds,
                             os.path.join(args.out, "gen", "speed"), langs, args.decode_beam, args.decode_batch,
                             log, cpu=not gpu)
    precompute_lengths = {p["precompute_length"] for p in parameters.values() if p.get("precompute_length")}
    result = {"settings": settings, "parameters": parameters, "training_steps": steps,
              "decoding": {arch: {str(n): v for n, v in per.items()} for arch, per in decoding.items()},
              "decoding_flops": arithmetic(speed_bin),
              "decode_lengths": args.lengths, "decode_sentences": args.decode_sentences,
              "decode_beam": args.decode_beam, "decode_batch": args.decode_batch,
              "decode_rounds": args.decode_rounds, "step_rounds": args.step_rounds, "timed_steps": args.timed_steps,
              "step_length": step_length, "step_batch": settings["step_batch"],
              "precompute_length": ", ".join(map(str, sorted(precompute_lengths))) or None,
              "devices": args.plan.describe()}
    _save_json(path, result)
    return result


def analyse(args, info, trained, log):
    """posnet-analyze's figures and numbers per model (OUT/analysis/ARCH/), its Toeplitz R^2 per
    position table ({arch: {side: R^2}}), and each model's position-mixing profiles
    (OUT/analysis/ARCH/mixing.json, posnet_fairseq.compare.mixing)."""
    from .. import translation_invariance
    from . import mixing

    max_positions = max(b[1] for b in info["buckets"])
    profiles, r2s = {}, {}
    for arch, checkpoint in trained.items():
        out = os.path.join(args.out, "analysis", arch)
        profile_path = os.path.join(out, "mixing.json")
        if os.path.exists(profile_path) and os.path.getmtime(profile_path) >= os.path.getmtime(checkpoint):
            log(f"analysis: skipped {arch}, analysed earlier ({out})")
            profiles[arch] = _load_json(profile_path)
            _, r2s[arch] = translation_invariance.analyse_checkpoint(checkpoint, None, max_positions)
        else:
            log(f"analysis: {arch}")
            lines, r2s[arch] = translation_invariance.analyse_checkpoint(checkpoint, out, max_positions)
            with open(os.path.join(out, "analyze.txt"), "w") as f:
                f.write("\n".join(lines) + "\n")
            profiles[arch] = mixing.offset_profiles(checkpoint, info["data_bin"])
            _save_json(profile_path, profiles[arch])
    return profiles, r2s


def run(p, args, argv):
    """The run of the checked ``args`` (:func:`posnet_fairseq.compare.options.check_args`); ``p``: the parser
    that reports errors; ``argv``: the command line as given (for the log and results.md)."""
    os.makedirs(args.out, exist_ok=True)
    log = Log(args.out)
    log(f"posnet-compare {' '.join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))}")

    from ..evaluation import generate_output
    from . import data, plots, quality, report, training

    recipe = training.Recipe(seed=args.seed, lr=args.lr, warmup_updates=args.warmup_updates,
                             max_tokens=args.max_tokens, dropout=args.dropout, interval=args.interval,
                             average=args.average)
    settings = {"budget": str(args.budget_obj), **vars(recipe), "model_flags": args.model_flags, "beam": args.beam,
                "max_len": [args.max_len_a, args.max_len_b]}
    if args.plan.device == "cuda":  # a CPU run's settings stay as they were before GPUs were planned for
        settings.update(device="cuda", fp16=args.plan.fp16)
    try:
        check_settings(args.out, settings, args.flags)
    except ValueError as err:
        p.error(str(err))
    try:
        info = data.prepare(args.out, args.mode, log, raw=args.raw, raw_given=args.raw_given, data_bin=args.data,
                            post_process=args.post_process, train_max_len=args.train_max_len,
                            test_max_len=args.test_max_len, n_buckets=args.buckets, synth_train=args.train_pairs,
                            valid=args.valid, test=args.test, vocab_size=args.vocab_size, seed=args.seed)
    except (ValueError, FileNotFoundError) as err:
        p.error(str(err))
    train_limit = info["train_max_len"] or info["longest_train"]

    trainer = training.Trainer(args.out, info["data_bin"], args.budget_obj, recipe, args.plan, log,
                               args.progress_every)
    log(f"train: {len(args.arch_list)} models, {args.budget_obj} each, {args.plan.jobs} at a time on "
        + (f"{args.plan.jobs} GPU(s), {'fp16' if args.plan.fp16 else 'fp32'}" if args.plan.device == "cuda"
           else "the CPU, one thread each"))
    outcomes = trainer.run(args.arch_list, args.flags)
    trained = {a: outcomes[a]["checkpoint"] for a in args.arch_list if "checkpoint" in outcomes[a]}
    if not trained:
        log("every training failed; see the logs in " + trainer.dir)
        return 1

    failed = quality.translate_all(trained, info, args.out, args.plan,
                                   ["--beam", str(args.beam), "--batch-size", str(args.batch_size),
                                    "--max-len-a", repr(args.max_len_a), "--max-len-b", str(args.max_len_b)], log)
    translated = {a: c for a, c in trained.items() if a not in failed}
    limits = {arch: quality.model_limits(checkpoint) for arch, checkpoint in trained.items()}
    src_tokens, tgt_tokens = quality.token_lengths(info)
    outputs, t_lines, n = {}, {}, len(src_tokens)
    for arch in translated:
        output = generate_output.read(os.path.join(args.out, "gen", f"{arch}.out"))
        outputs[arch] = (output.ordered("hypotheses", n), output.missing(n))
        t_lines = {**output.references, **t_lines}
    scored = [a for a in args.arch_list if a in outputs]
    buckets = data.merge_small_buckets(info["buckets"], info["test_lengths"], args.min_bucket_sentences, train_limit)
    log(f"quality: sacreBLEU with {args.bootstrap_samples} bootstrap resamples; length buckets "
        + ", ".join(f"{lo}-{hi}" + (" (too few sentences)" if small else "") for lo, hi, small in buckets))
    quality_result = quality.score(scored, outputs, quality.references(info, [t_lines.get(i, "") for i in range(n)]),
                                   info["test_lengths"], src_tokens, tgt_tokens, limits, buckets, train_limit,
                                   force=args.mode == "synthetic", samples=args.bootstrap_samples)
    quality_result["min_bucket_sentences"] = args.min_bucket_sentences
    quality_result["length_unit"] = info["length_unit"]
    quality_result["failed"] = failed
    _save_json(os.path.join(args.out, "quality.json"), quality_result)

    cost_result = measure_cost(args, info, translated, limits,
                               {arch: trainer.log_path(arch) for arch in translated}, log)
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
        "devices": args.plan.describe(),
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
                + f", test {info['test_sentences']} sentences; SentencePiece {info['vocab']} types, learned on the "
                "training split only"
                + ("; splits: " + "; ".join(f"{split}: {origin}" for split, origin in info["splits"].items())
                   if info.get("splits") else ""))
    return (f"data-bin {info['data_bin']} ({info['train_pairs']} training pairs, test {info['test_sentences']} "
            f"sentences), scored on fairseq's post-processed references ({args.post_process or 'none'})")


