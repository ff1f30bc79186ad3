"""One ``posnet-compare`` run from its checked arguments: data, training, translation, scores, cost, analysis,
report and plots, each step skipped when a previous run finished it (see docs/compare.md)."""
import contextlib
import dataclasses
import datetime
import functools
import os
import shlex
import sys

from .. import fairseq_log, translation_invariance
from . import cost, data, mixing, model_flags, paths, plots, quality, recipe as recipes, records, report, run_lock, \
    seeds, stopping, test_groups, training, verdict
from .concatenated import JoinedExamples
from .exit_status import of_run
from .steps import CheckpointsDeleted, Steps, load_json, require_checkpoints, save_json


class Log:
    """Prints a line with the time and appends it to OUT/compare.log."""

    def __init__(self, out_dir):
        self.path = os.path.join(out_dir, "compare.log")

    def check(self):
        """Opens the log for appending: an OSError when --out cannot be written."""
        with open(self.path, "a"):
            pass

    def __call__(self, message):
        line = f"[posnet-compare {datetime.datetime.now():%H:%M:%S}] {message}"
        print(line, flush=True)
        with open(self.path, "a") as f:
            f.write(line + "\n")


def check_settings(steps, recipe_of, flags, first_seed, seed_offsets=None):
    """A re-run may add models and seeds, but not change the shared recipe or a begun model's flags (its models
    would not be comparable): ValueError naming what changed. ``recipe_of(seed)``: the settings every step
    train/MODEL trained with that seed shares (MODEL: :func:`posnet_fairseq.compare.seeds.key`); ``flags``:
    {arch: its flags}; ``seed_offsets``: --seed-offset. A model whose training failed recorded nothing, so its
    flags lock nothing."""
    changed = set()
    for name in steps.names("train/"):
        arch, seed = seeds.split(name.split("/", 1)[1], first_seed)
        settings = dict(recipe_of(seeds.trained(arch, seed, seed_offsets or {})), flags=flags.get(arch))
        for key in steps.changed(name, settings):
            if key != "flags":
                changed.add(key)
            elif arch in flags:
                changed.add(f"flags of {arch}")
    if changed:
        raise ValueError(f"{steps.out} was made with other settings ({', '.join(sorted(changed))}): its models "
                         f"would not be comparable with new ones; use a new --out")


def analyse(steps, info, trained, log):
    """posnet-analyze's figures and numbers per model (OUT/analysis/ARCH/, the step analysis/ARCH), its
    Toeplitz R^2 per position table ({arch: {side: R^2}}), and each model's position-mixing profiles
    (OUT/analysis/ARCH/mixing.json, posnet_fairseq.compare.mixing)."""
    max_positions = max(b[1] for b in info.buckets)
    profiles, r2s = {}, {}
    for arch, checkpoint in trained.items():
        out = os.path.join(steps.out, "analysis", arch)
        profile_path, text_path = os.path.join(out, "mixing.json"), os.path.join(out, "analyze.txt")
        name, settings = f"analysis/{arch}", {"max_positions": max_positions}
        inputs = {"checkpoint": checkpoint, "data": info.data_bin}
        if steps.why_not_done(name, settings, inputs) is None:
            log(f"analysis: skipped {arch}, analysed earlier ({out})")
        else:
            require_checkpoints({arch: checkpoint}, f"analysing {arch} again")
            log(f"analysis: {arch}")
            lines, r2 = translation_invariance.analyse_checkpoint(checkpoint, out, max_positions)
            with open(text_path, "w") as f:
                f.write("\n".join(lines) + "\n")
            save_json(profile_path, mixing.offset_profiles(checkpoint, info.data_bin))
            steps.finish(name, settings, inputs, [profile_path, text_path], r2)
        profiles[arch], r2s[arch] = load_json(profile_path), steps.result(name)
    return profiles, r2s


def run(p, args, argv):
    """The run of the checked ``args`` (:func:`posnet_fairseq.compare.options.check_args`); ``p``: the parser
    that reports errors; ``argv``: the command line as given (for the log and results.md)."""
    try:
        with contextlib.ExitStack() as lock:  # the lock of --out, taken by _run (posnet_fairseq.compare.run_lock)
            return _run(p, args, argv, lock)
    except CheckpointsDeleted as err:
        p.error(str(err))


def _run(p, args, argv, lock):
    """The run, step by step: data, training, translation, scores and verdict, cost, analysis, report."""
    log = _open_log(p, args, argv, lock)
    steps = Steps(args.out)
    name = functools.partial(_model_name, args.seed)
    recipe, train_flags = _recipe(p, args, steps)
    info = _data(p, args, steps, log)
    groups = _groups(p, args, info)
    trainer = training.Trainer(steps, info.data_bin, args.budget_obj, recipe, args.plan, log, args.progress_every,
                               split=lambda model: seeds.split(model, args.seed),
                               reuse_from=[Steps(run) for run in args.reuse_from], seed_offsets=args.seed_offsets)
    models = [name(arch, seed) for seed in args.seed_list for arch in args.arch_list]
    outcomes = _train(args, trainer, models, train_flags, name, log)
    trained = {m: outcomes[m].checkpoint for m in models if outcomes[m].checkpoint}
    failed = _translate(args, steps, info, trained, name, log)
    translated = {m: c for m, c in trained.items() if m not in failed}
    # An architecture is compared when every one of its seeds translated.
    complete = [a for a in args.arch_list if all(name(a, s) in translated for s in args.seed_list)]
    if args.arch_list[0] not in complete:
        return _failed_baseline(args, models, outcomes, failed, translated, trainer.dir, name, log)
    limits = {m: quality.model_limits(checkpoint) for m, checkpoint in trained.items()}
    quality_result, stops = _quality(args, steps, info, translated, limits, failed, complete, name, log, groups)
    # Cost and analysis do not depend on the seed: once per architecture, on its first seed's model.
    firsts = {arch: name(arch, args.seed_list[0]) for arch in complete}
    cost_result = cost.measure(args, steps, info, {a: translated[m] for a, m in firsts.items()},
                               {a: limits[m] for a, m in firsts.items()},
                               {a: trainer.log_path(m) for a, m in firsts.items()}, log)
    profiles, r2s = analyse(steps, info, {a: translated[m] for a, m in firsts.items()}, log)
    table, text = report.write(args.out, args.arch_list, _portable(outcomes, args.out),
                               quality_result, cost_result, r2s, _context(args, argv, info, outcomes),
                               args.seed_list, name, stops)
    _plots(args, info, trainer, table, quality_result, complete, profiles, name)
    log(f"wrote {args.out}/results.md, results.csv, plots/*.png")
    if args.delete_checkpoints:  # every step that reads a compared model's checkpoints is done
        _delete_checkpoints(trainer, [name(a, s) for a in complete for s in args.seed_list], limits, log)
    print(text)
    return of_run(models, outcomes, failed, log)  # issue 49: a failed model fails the run, its report written


def _portable(outcomes, out):
    """``outcomes`` as results.md names them: the run each was taken from (--reuse-from) portably."""
    return {model: dataclasses.replace(o, reused_from=paths.portable(o.reused_from, out)) if o.reused_from else o
            for model, o in outcomes.items()}


def _model_name(first, arch, seed):
    """The model of ``arch`` trained with ``seed`` (its steps, checkpoints and translation)."""
    return seeds.key(arch, seed, first)


def _argv(argv):
    return argv if argv is not None else sys.argv[1:]


def _user_paths(args):
    """The files and folders the command line names: results.md names them portably (compare.paths)."""
    return [*(args.raw or []), *(path for pair in args.raw_given.values() for path in pair),
            *([args.data] if args.data else []), args.out, *args.reuse_from]


def _open_log(p, args, argv, lock):
    """OUT/compare.log, once ``lock`` holds --out (issue 49: one run at a time on it)."""
    try:
        os.makedirs(args.out, exist_ok=True)
        log = Log(args.out)
        log.check()
    except OSError as err:
        p.error(f"--out {args.out} cannot be written ({err.strerror}); give a directory you can write to")
    lock.enter_context(run_lock.held(p, args.out, log))
    log(f"posnet-compare {' '.join(shlex.quote(a) for a in _argv(argv))}")
    return log


def _recipe(p, args, steps):
    """The shared recipe and each model's fairseq-train flags (its model flags, then the training task's of
    --concat-train); a parser error when --out holds models of other settings."""
    recipe = recipes.Recipe(seed=args.seed, lr=args.lr, warmup_updates=args.warmup_updates,
                            max_tokens=args.max_tokens, dropout=args.dropout, interval=args.interval,
                            average=args.average)
    train_flags = {arch: flags + args.train_task_flags for arch, flags in args.flags.items()}
    try:
        check_settings(steps, lambda seed: recipes.step_settings(dataclasses.replace(recipe, seed=seed),
                                                                 args.budget_obj, args.plan), train_flags, args.seed,
                       args.seed_offsets)
    except ValueError as err:
        p.error(str(err))
    return recipe, train_flags


def _data(p, args, steps, log):
    try:
        return data.prepare(steps, args.mode, log, raw=args.raw, raw_given=args.raw_given, data_bin=args.data,
                            post_process=args.post_process, train_max_len=args.train_max_len,
                            test_max_len=args.test_max_len, n_buckets=args.buckets, synth_train=args.train_pairs,
                            valid=args.valid, test=args.test, vocab_size=args.vocab_size, seed=args.seed,
                            positions=[max(limit[side] for limit in args.model_limits.values()) for side in (0, 1)],
                            concat_test=args.concat_test)
    except (ValueError, FileNotFoundError) as err:
        p.error(str(err))


def _train(args, trainer, models, train_flags, name, log):
    seed_list = args.seed_list
    log(f"train: {len(args.arch_list)} models x {len(seed_list)} seed{'s' if len(seed_list) > 1 else ''} "
        f"({', '.join(map(str, seed_list))}), {args.budget_obj} each, {args.plan.jobs} at a time on "
        + (f"{args.plan.jobs} GPU(s), {'fp16' if args.plan.fp16 else 'fp32'}" if args.plan.device == "cuda"
           else "the CPU, one thread each"))
    for note in model_flags.validated_otherwise(args.flags, args.generate_flags).values():
        log(f"train: note: {note}")
    return trainer.run(models, {name(a, s): train_flags[a] for a in args.arch_list for s in seed_list})


def _groups(p, args, info):
    """--test-groups: (the group of each natural test sentence, of each joined example), or None without it."""
    if not args.test_groups:
        return None
    try:
        return test_groups.for_run(args.test_groups, info)
    except OSError as err:
        p.error(f"--test-groups {args.test_groups}: {err.strerror}")
    except ValueError as err:
        p.error(str(err))


def _translate(args, steps, info, trained, name, log):
    """{model: why its translation failed}; nothing is translated while a model of the baseline is missing."""
    if any(name(args.arch_list[0], s) not in trained for s in args.seed_list):
        return {}
    return quality.translate_all(
        steps, trained, info, args.plan, ["--beam", str(args.beam), "--batch-size", str(args.batch_size),
                                          "--max-len-a", repr(args.max_len_a), "--max-len-b", str(args.max_len_b)],
        log, {name(a, s): args.generate_flags[a] for a in args.arch_list for s in args.seed_list})


def _failed_baseline(args, models, outcomes, failed, translated, logs, name, log):
    """Every ratio and p-value is against the baseline: none is computed against another model."""
    baseline = args.arch_list[0]
    model = next(name(baseline, s) for s in args.seed_list if name(baseline, s) not in translated)
    why = outcomes[model].failed or failed[model]
    log(f"baseline {model} FAILED ({why.splitlines()[0]}); nothing compared; see the logs in {logs}")
    print(report.write_failed_baseline(args.out, models, outcomes, failed, logs, model))
    return 1


def _quality(args, steps, info, translated, limits, failed, complete, name, log, groups=None):
    """The scoring step's record (:class:`~posnet_fairseq.compare.records.Quality`, saved as OUT/quality.json:
    each seed's models against the baseline of the same seed, and the verdict) and where each model's hypotheses
    ended, per bucket; ``groups``: :func:`_groups`."""
    (outputs, refs, src_tokens, tgt_tokens), joined, parsed = quality.read_outputs(args.out, info, translated)
    train_limit, force = info.train_limit, args.mode == "synthetic"
    buckets = data.merge_small_buckets(info.buckets, info.test_lengths, args.min_bucket_sentences, train_limit)
    log(f"quality: sacreBLEU with {args.bootstrap_samples} bootstrap resamples; length buckets "
        + ", ".join(f"{lo}-{hi}" + (" (too few sentences)" if small else "") for lo, hi, small in buckets))

    def seed_quality(seed):
        models = [name(a, seed) for a in complete]
        result = quality.score(models, outputs, refs, info.test_lengths, src_tokens, tgt_tokens, limits, buckets,
                               train_limit, force=force, samples=args.bootstrap_samples)
        return quality.add_joined_buckets(result, info.concatenated, models, joined, limits, train_limit,
                                          args.min_bucket_sentences, force=force) if info.concatenated else result

    scored = quality.merge([seed_quality(s) for s in args.seed_list])
    rows = scored.stored()["buckets"]  # as quality.json holds them, for the steps that read that
    bleu = quality.metrics(force)[0]  # the verdicts' and the stopping table's sentence-level BLEU
    judged = _verdicts(args, info, bleu, complete, outputs, refs, joined, name, log)
    within, beyond = verdict.kept_subsets(buckets, info.test_lengths, train_limit)
    hyps = lambda part: {m: o[0] for m, o in part.items()}  # noqa: E731
    # --concat-test: the joined examples, their buckets beyond kept against the same natural reference bucket
    examples = info.concatenated and JoinedExamples(hyps(joined[0]), joined[1], info.concatenated["lengths"],
                                                    verdict.joined_kept_subsets(rows, info.concatenated["lengths"]))
    weights, groups_summary = None, None
    if groups:
        beyond, weights = test_groups.balance(groups[0], within, beyond)
        if examples and examples.beyond:
            balanced, joined_weights = test_groups.balance(groups[0], within, examples.beyond, groups[1])
            examples = examples._replace(beyond=balanced)
            weights.update(joined_weights)
        natural = hyps(outputs), refs, info.test_lengths, groups[0]
        groups_summary = test_groups.summary(bleu, args.test_groups, within, natural, examples and (
            examples.hypotheses, examples.references, examples.lengths, groups[1]), rows)
    kept = verdict.kept(bleu, complete, args.seed_list, hyps(outputs), name, refs, within, beyond, weights,
                        joined=examples and examples.beyond and (
                            examples.hypotheses, examples.references, examples.beyond))
    judged, kept = verdict.corrected(judged, kept)
    result = dataclasses.replace(scored, min_bucket_sentences=args.min_bucket_sentences, length_unit=info.length_unit,
                                 failed=records.frozen(failed), seeds=tuple(args.seed_list),
                                 verdict=records.frozen(judged), kept=records.frozen(kept),
                                 test_groups=records.frozen(groups_summary))
    save_json(os.path.join(args.out, "quality.json"), result.stored())
    models = [name(a, s) for s in args.seed_list for a in args.arch_list]
    stops = stopping.tables(steps, info, rows, bleu, [m for m in models if m in translated], parsed)
    return result, stops


def _verdicts(args, info, bleu, complete, outputs, refs, joined, name, log):
    """quality.json's "verdict": each model against the baseline in range and beyond, and on the joined
    examples beyond the training lengths (--concat-test) a verdict of their own."""
    seed_list, train_limit = args.seed_list, info.train_limit
    log(f"verdict: t-test over {len(seed_list)} seed pair(s) and the test sentences, Holm over the report")
    result = verdict.verdicts(bleu, complete, seed_list, {m: outputs[m][0] for m in outputs}, name, refs,
                              verdict.by_length(info.test_lengths, train_limit))
    if info.concatenated:
        joined_outputs, joined_refs = joined[0], joined[1]
        beyond = verdict.by_length(info.concatenated["lengths"], train_limit)["beyond"]
        longer = verdict.verdicts(bleu, complete, seed_list, {m: joined_outputs[m][0] for m in joined_outputs},
                                  name, joined_refs, {"joined": beyond})
        for arch, sides in longer.items():
            result[arch]["joined"] = sides["joined"]
    return result


def _budget_line(args):
    """results.md's "budget": the budget, the seeds and the recipe (its fixed parts read from
    :mod:`posnet_fairseq.compare.recipe`)."""
    seed_list, budget = args.seed_list, args.budget_obj
    return (f"{budget} per model; "
            + (f"seeds {', '.join(map(str, seed_list))} (every model once per seed; data seed {args.seed})"
               if len(seed_list) > 1 else f"seed {seed_list[0]}")
            + "".join(f"; `{arch}` with the seed{'s' if len(seed_list) > 1 else ''} "
                      f"{', '.join(str(seeds.trained(arch, s, args.seed_offsets)) for s in seed_list)} "
                      f"(--seed-offset {n})" for arch, n in args.seed_offsets.items())
            + f"; Adam {recipes.ADAM_BETAS}, lr {args.lr:g}, inverse-sqrt schedule with {args.warmup_updates} "
            f"warm-up updates, label smoothing {recipes.LABEL_SMOOTHING:g}, dropout {args.dropout:g}, at most "
            f"{args.max_tokens} tokens per batch; evaluated: the average of the "
            + (f"{args.average} best checkpoints (lowest validation loss)" if budget.patience else
               f"last {args.average} {'epoch' if budget.unit == 'epochs' else 'update'} checkpoints")
            + f" (saved every {args.interval} updates)" + (f"; model flags {args.model_flags}"
                                                           if args.model_flags else ""))


def _context(args, argv, info, outcomes):
    """The settings at the top of results.md, every path the user gave named portably (compare.paths)."""
    given = _user_paths(args)
    context = {
        "command": f"`posnet-compare {paths.command(_argv(argv), args.out)}`",
        "data": paths.portable_text(describe_data(args, info), given, args.out),
        "budget": _budget_line(args),
        "trained": ", ".join(f"`{m}` {o.updates} updates" + (" (not converged)" if o.converged is False else "")
                             for m, o in outcomes.items() if o.checkpoint),
        "test translation": f"fairseq-generate, beam {args.beam}, at most {args.max_len_a:g} x source length + "
                            f"{args.max_len_b} tokens",
        "baseline (ratios, significance)": f"`{args.arch_list[0]}`",
        "devices": args.plan.describe(),
    }
    extra = {a: f for a, f in args.flags.items() if f and f != shlex.split(args.model_flags)}
    if extra:
        context["per-model flags"] = "; ".join(f"`{a}`: `{' '.join(f)}`" for a, f in extra.items())
    return context


def _plots(args, info, trainer, table, quality_result, complete, profiles, name):
    """OUT/plots/*.png and OUT/results.json, from which :func:`posnet_fairseq.compare.plots.replot` draws them
    again."""
    first, seed_list = args.seed_list[0], args.seed_list
    curves = {arch: fairseq_log.valid_curve(trainer.log_path(name(arch, first))) for arch in args.arch_list
              if os.path.exists(trainer.log_path(name(arch, first)))}
    seed_curves = {arch: {str(s): fairseq_log.valid_curve(trainer.log_path(name(arch, s))) for s in seed_list[1:]
                          if os.path.exists(trainer.log_path(name(arch, s)))} for arch in args.arch_list}
    plot_dir = os.path.join(args.out, "plots")
    os.makedirs(plot_dir, exist_ok=True)
    plots.bleu_vs_speed(table, args.lengths[0], args.arch_list[0], os.path.join(plot_dir, "bleu_vs_speed.png"),
                        seed_list)
    rows = quality_result.stored()["buckets"]  # as results.json keeps them, from which plots.replot draws
    plots.bleu_by_length(table, rows, info.train_limit, info.length_unit,
                         os.path.join(plot_dir, "bleu_by_length.png"), seed_list)
    plots.valid_loss(args.arch_list, curves, os.path.join(plot_dir, "valid_loss.png"), seed_curves)
    plots.position_mixing(complete, profiles, os.path.join(plot_dir, "position_mixing.png"))
    save_json(os.path.join(args.out, "results.json"), {"table": table, "buckets": rows,
                                                        "train_limit": info.train_limit, "curves": curves,
                                                        "mixing": profiles,
                                                        "decode_lengths": args.lengths, "seeds": seed_list,
                                                        "seed_curves": seed_curves})


def _delete_checkpoints(trainer, models, limits, log):
    freed = {model: trainer.delete_checkpoints(model, limits[model]) for model in models}
    emptied = [model for model, size in freed.items() if size]  # the others' went in an earlier run
    if emptied:
        log(f"checkpoints: deleted those of {len(emptied)} models ({sum(freed.values()) / 2 ** 20:.0f} MiB); "
            "their translations, training logs and step records stay (--delete-checkpoints)")
    else:
        log("checkpoints: none left to delete, an earlier run deleted them (--delete-checkpoints)")


def describe_data(args, info):
    b = info.buckets
    if args.mode == "synthetic":
        return (f"synthetic corpus (`posnet-synth`, seed {args.seed}): {info.train_pairs} training pairs of at "
                f"most {args.train_max_len} words per side; test set of {info.test_sentences} sentences, source "
                f"lengths {b[0][0]}-{b[-1][1]} in {len(b)} buckets of equal size; SentencePiece "
                f"{info.vocab} types (joined dictionary)")
    if args.mode == "raw":
        return (f"{args.raw[0]} / {args.raw[1]}: {info.train_pairs} training pairs"
                + (f" of at most {args.train_max_len} pieces per side" if args.train_max_len else "")
                + f", test {info.test_sentences} sentences; SentencePiece {info.vocab} types, learned on the "
                "training split only"
                + ("; splits: " + "; ".join(f"{split}: {origin}" for split, origin in info.splits.items())
                   if info.splits else "")
                + (f"; left out as longer than the models take ({info.positions[0]} source / {info.positions[1]} "
                   "target positions, EOS included): " + ", ".join(f"{split} {n}" for split, n in info.too_long.items())
                   if info.too_long and any(info.too_long.values()) else ""))
    return (f"data-bin {info.data_bin} ({info.train_pairs} training pairs, test {info.test_sentences} "
            f"sentences), scored on fairseq's post-processed references ({args.post_process or 'none'})")


