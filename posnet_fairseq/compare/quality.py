"""Translation quality of a ``posnet-compare`` run: overall and per source-length bucket.

Each model translates the test set with ``fairseq-generate`` (beam search;
sentences longer than the model accepts are skipped and scored as empty, as
in :mod:`posnet_fairseq.evaluation.evaluate`). Scores are sacreBLEU's: BLEU
and chrF with their signatures; the plugin's paired bootstrap
(:mod:`posnet_fairseq.evaluation.bootstrap`, 1000 resamples, seed 12345, all
models on the same resamples) gives the 95% confidence interval of every
model (mean +- half-width, as sacreBLEU prints it) and its two-sided p-value
against the first one (twice the smaller of P(not better) and P(not worse)),
with the direction where it is at most 0.05.

BLEU per bucket is corpus BLEU on the test sentences whose source length
falls into the bucket, with its own bootstrap interval and the ratio of
hypothesis to reference length (below 1: the model stops too early). A bucket in which a
model cannot take any sentence (a fixed-length mixer such as LinearNet)
reports "beyond its N positions" instead of a score; a bucket with fewer
test sentences than ``--min-bucket-sentences`` that could not be merged into
a neighbour is marked too small and not scored.
"""
import functools
import os
from dataclasses import replace
from types import MappingProxyType

from .. import compat
from ..evaluation import bootstrap, generate_output
from ..plugin import PLUGIN_DIR, subprocess_env
from ..process_pool import python_command
from . import concatenated, data
from .records import Bucket, BucketScore, Quality, Score, System, frozen
from .steps import deleted, require_checkpoints

SEED = 12345  # sacreBLEU's default bootstrap seed


def generate_command(info, checkpoint, generation_flags):
    return python_command("posnet_fairseq.cli.fairseq_wrappers", "generate", info.data_bin, "--user-dir", PLUGIN_DIR,
                          "--path", checkpoint, "--source-lang", info.source_lang, "--target-lang", info.target_lang,
                          "--gen-subset", "test", *generation_flags, "--num-workers", "0",
                          # fairseq drops a last batch whose size is not a multiple of this (default 8).
                          "--required-batch-size-multiple", "1", "--skip-invalid-size-inputs-valid-test",
                          *(["--post-process", info.post_process] if info.post_process else []))


def translate_all(steps, checkpoints, info, plan, generation_flags, log, own_flags=None):
    """OUT/gen/ARCH.out (fairseq-generate's output) for every {arch: checkpoint}, one per slot of the
    device ``plan`` at a time, with ``generation_flags`` and the arch's ``own_flags`` after them; the step
    translate/ARCH keeps an output while its checkpoint, the data and the flags are the same. Returns {arch:
    error message} for failures."""
    gen_dir = os.path.join(steps.out, "gen")
    os.makedirs(gen_dir, exist_ok=True)
    flags = {arch: [*generation_flags, *plan.generate_flags(), *(own_flags or {}).get(arch, [])]
             for arch in checkpoints}
    settings = {arch: {"flags": flags[arch]} for arch in checkpoints}
    inputs = {arch: {"checkpoint": checkpoint, "data": info.data_bin} for arch, checkpoint in checkpoints.items()}
    queue, files, failed = [], {}, {}
    for arch in checkpoints:
        why = steps.why_not_done(f"translate/{arch}", settings[arch], inputs[arch])
        if why is None:
            log(f"translate: skipped {arch}, translated earlier ({gen_dir}/{arch}.out)")
        else:
            require_checkpoints({arch: checkpoints[arch]}, f"translating {arch} again ({why})")
            queue.append(arch)
            if steps.load(f"translate/{arch}") is not None:  # issue 49: a re-done translation says why
                log(f"translate: {arch} is translated again: {why}")

    pool = plan.pool("translate", log, poll_seconds=0.2)

    def start(arch, env):
        log(f"translate: {arch}")
        files[arch] = (open(os.path.join(gen_dir, f"{arch}.out.tmp"), "w"),
                       open(os.path.join(gen_dir, f"{arch}.log"), "w"))
        return pool.popen(generate_command(info, checkpoints[arch], flags[arch]), stdout=files[arch][0],
                          stderr=files[arch][1], env=subprocess_env(**env))

    def close(arch, _=None):
        for f in files.pop(arch):
            f.close()

    def finish(arch, process):
        close(arch)
        out = os.path.join(gen_dir, f"{arch}.out")
        if process.returncode == 0:
            os.replace(out + ".tmp", out)
            steps.finish(f"translate/{arch}", settings[arch], inputs[arch], [out])
            return
        if process.returncode < 0:
            failed[arch] = (f"fairseq-generate was killed (signal {-process.returncode}); re-running the same "
                            "command translates it again")
        else:
            with open(os.path.join(gen_dir, f"{arch}.log"), errors="replace") as f:
                tail = f.readlines()[-5:]
            failed[arch] = f"fairseq-generate exit {process.returncode}: " + "".join(tail).strip()
        log(f"translate: {arch} FAILED ({failed[arch].splitlines()[0]}), see {gen_dir}/{arch}.log")

    pool.run(queue, start, finish, stopped=close)
    return failed


def model_limits(checkpoint):
    """(source, target) positions a checkpoint's model accepts (fairseq's max_*_positions); for a checkpoint
    removed by --delete-checkpoints, those its record kept."""
    from fairseq import checkpoint_utils

    gone = deleted(checkpoint)
    if gone is not None:
        return tuple(gone["positions"])

    compat.allow_fairseq_checkpoint_classes()  # torch's safe loader, as the plugin's import does
    model = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)["cfg"]["model"]
    # A Namespace (fairseq-train's legacy arguments) or a dict-like config.
    get = model.get if hasattr(model, "get") else lambda key: getattr(model, key)
    return int(get("max_source_positions")), int(get("max_target_positions"))


def metrics(force):
    from sacrebleu.metrics import BLEU, CHRF

    # force: the synthetic corpus is space-separated by design (the final "." is a token).
    return BLEU(force=force), CHRF()


def against_first(metric, systems, refs, samples):
    """:func:`posnet_fairseq.evaluation.bootstrap.against_first` as :class:`~posnet_fairseq.compare.records.Score`
    records, with ``p``: the two-sided p-value and ``direction``: better / worse where it is at most 0.05."""
    return [Score(r["score"], r["mean"], r["ci"], *((None, None) if r["p_value"] is None else
                                                   (bootstrap.two_sided(r), bootstrap.significance(r))),
                  r["p_value"], r["p_value_worse"])
            for r in bootstrap.against_first(metric, systems, refs, samples, SEED)]


def signature(metric, samples):
    return f"{metric.get_signature()} + paired bootstrap: {samples} resamples, seed {SEED}"


def score(archs, outputs, refs, lengths, src_tokens, tgt_tokens, limits, buckets, train_limit, force,
          samples=1000) -> Quality:
    """The quality part of the results (see the module docstring), without the run's settings and verdict.

    ``outputs[arch]`` = (hypotheses, skipped ids); ``lengths``: source length of each test sentence
    in the unit of ``buckets`` ([(lo, hi, too_small)], :func:`posnet_fairseq.compare.data.merge_small_buckets`)
    and ``train_limit`` (the longest training length); ``src_tokens``/``tgt_tokens``: model tokens, against
    ``limits[arch]`` = (source, target) positions."""
    bleu, chrf = metrics(force)
    hyps = [outputs[a][0] for a in archs]
    bleus, chrfs = (against_first(metric, hyps, refs, samples) for metric in (bleu, chrf))
    systems = {arch: System(b, c, len(outputs[arch][1]), tuple(limits[arch]))
               for arch, b, c in zip(archs, bleus, chrfs)}
    bucket_rows = score_buckets(archs, outputs, refs, lengths, src_tokens, tgt_tokens, limits, buckets, train_limit,
                                bleu, samples)
    return Quality(MappingProxyType(systems), bucket_rows, frozen({"BLEU": signature(bleu, samples),
                                                                  "chrF": signature(chrf, samples)}),
                   train_limit, samples, None, None, baseline=archs[0])


def score_buckets(archs, outputs, refs, lengths, src_tokens, tgt_tokens, limits, buckets, train_limit, bleu, samples,
                  k=None):
    """The :class:`~posnet_fairseq.compare.records.Bucket` records of :func:`score` (its arguments; ``bleu``: the
    BLEU metric; ``k``: --concat-test's K for joined examples): each bucket's sentences and each model's BLEU,
    bootstrap interval and length ratio, or why it has none."""
    rows = []
    for lo, hi, too_small in buckets:
        ids = [i for i, n in enumerate(lengths) if lo <= n <= hi]
        scores = (_bucket_scores(archs, outputs, refs, ids, src_tokens, tgt_tokens, limits, bleu, samples)
                  if ids and not too_small else MappingProxyType({}))
        rows.append(Bucket(lo, hi, len(ids), lo > train_limit, too_small, scores, k))
    return tuple(rows)


def _bucket_scores(archs, outputs, refs, ids, src_tokens, tgt_tokens, limits, bleu, samples):
    """{arch: BucketScore} of the test sentences ``ids``: the models that can take one of them scored, in the
    order of ``archs``, then those that take none (reported, not scored)."""
    fits = {arch: [i for i in ids if src_tokens[i] < limits[arch][0] and tgt_tokens[i] < limits[arch][1]]
            for arch in archs}
    scored = [arch for arch in archs if fits[arch]]
    scores = {}
    if scored:
        bucket_refs = [refs[i] for i in ids]
        hyps = [[outputs[arch][0][i] for i in ids] for arch in scored]
        for arch, result, bucket_hyps in zip(scored, against_first(bleu, hyps, bucket_refs, samples), hyps):
            skipped = set(outputs[arch][1])
            # hypothesis / reference length (sacreBLEU's tokens): below 1, the model stopped early
            plain = bleu.corpus_score(bucket_hyps, [bucket_refs])
            scores[arch] = BucketScore(result, sum(i in skipped for i in ids), plain.sys_len / max(plain.ref_len, 1))
    for arch in archs:
        if not fits[arch]:
            scores[arch] = BucketScore(beyond=min(limits[arch]))
    return MappingProxyType(scores)


def merge(results) -> Quality:
    """One record of :func:`score` from several (one per seed, each with its own models): their systems and
    each bucket's scores side by side."""
    return functools.reduce(Quality.merged, results)


def add_joined_buckets(quality_result, joined, archs, parts, limits, train_limit, minimum, force) -> Quality:
    """``quality_result`` (:func:`score`'s) with the joined examples' buckets, each marked ``concatenated``: K,
    after the natural ones, and ``concatenated``: what results.md says of them
    (:mod:`posnet_fairseq.compare.concatenated`). ``parts``: the joined part of
    :func:`posnet_fairseq.compare.concatenated.split_outputs`; ``minimum``: --min-bucket-sentences;
    ``force``: sacreBLEU's (the synthetic corpus)."""
    lengths = joined["lengths"]
    spans = data.merge_small_buckets(concatenated.buckets(lengths, train_limit), lengths, minimum, train_limit)
    outputs, refs, src_tokens, tgt_tokens = parts
    rows = score_buckets(archs, outputs, refs, lengths, src_tokens, tgt_tokens, limits, spans, train_limit,
                         metrics(force)[0], quality_result.samples, k=joined["k"])
    summary = {**{key: v for key, v in joined.items() if key != "lengths"},
               "within_training": sum(n <= train_limit for n in lengths)}
    return replace(quality_result, buckets=quality_result.buckets + rows, concatenated=frozen(summary))


def references(info, outputs_refs):
    """The raw reference text (synthetic, --raw) or fairseq's post-processed T- lines (--data)."""
    if info.references:
        with open(info.references, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]
    return outputs_refs


def read_outputs(out, info, translated):
    """(outputs {model: (hypotheses, skipped ids)}, references, source tokens, target tokens) of the natural
    test sentences and of the joined ones (--concat-test), and {model: its parsed translation file}, for the
    run in ``out``."""
    src_tokens, tgt_tokens = token_lengths(info)
    parsed, outputs, t_lines, n = {}, {}, {}, len(src_tokens)
    for model in translated:
        parsed[model] = output = generate_output.read(os.path.join(out, "gen", f"{model}.out"))
        outputs[model] = (output.ordered("hypotheses", n), output.missing(n))
        t_lines = {**output.references, **t_lines}
    refs = references(info, [t_lines.get(i, "") for i in range(n)])
    natural, joined = concatenated.split_outputs(outputs, refs, src_tokens, tgt_tokens, info.test_sentences)
    return natural, joined, parsed


def token_lengths(info):
    """(source, target) model tokens of every test sentence, EOS excluded."""
    return (data.split_lengths(info.data_bin, "test", *info.langs),
            data.split_lengths(info.data_bin, "test", *info.langs, info.target_lang))
