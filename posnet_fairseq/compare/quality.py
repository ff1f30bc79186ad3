"""Translation quality of a ``posnet-compare`` run: overall and per source-length bucket.

Each model translates the test set with ``fairseq-generate`` (beam search;
sentences longer than the model accepts are skipped and scored as empty, as
in :mod:`posnet_fairseq.evaluation.evaluate`). Scores are sacreBLEU's: BLEU
and chrF with their signatures, and sacreBLEU's own paired bootstrap
resampling (``sacrebleu.significance.PairedTest``, 1000 resamples, seed
12345 unless ``SACREBLEU_SEED`` says otherwise) for the 95% confidence
interval of every model (mean +- half-width, as sacreBLEU prints it) and the
p-value of every model against the first one.

BLEU per bucket is corpus BLEU on the test sentences whose source length
falls into the bucket, with its own bootstrap interval and the ratio of
hypothesis to reference length (below 1: the model stops too early). A bucket in which a
model cannot take any sentence (a fixed-length mixer such as LinearNet)
reports "beyond its N positions" instead of a score.
"""
import os
import subprocess
import sys

from ..evaluation.evaluate import read_hypotheses
from ..plugin import PLUGIN_DIR, subprocess_env
from . import data


def generate_command(info, checkpoint, generation_flags):
    return [sys.executable, "-m", "fairseq_cli.generate", info["data_bin"], "--user-dir", PLUGIN_DIR,
            "--path", checkpoint, "--source-lang", info["source_lang"], "--target-lang", info["target_lang"],
            "--gen-subset", "test", *generation_flags, "--num-workers", "0",
            # fairseq drops a last batch whose size is not a multiple of this (default 8).
            "--required-batch-size-multiple", "1", "--skip-invalid-size-inputs-valid-test",
            *(["--post-process", info["post_process"]] if info["post_process"] else [])]


def translate_all(checkpoints, info, out_dir, jobs, generation_flags, log):
    """OUT/gen/ARCH.out (fairseq-generate's output) for every {arch: checkpoint}, ``jobs`` at a time,
    one thread each; an existing output is kept. Returns {arch: error message} for failures."""
    import time

    gen_dir = os.path.join(out_dir, "gen")
    os.makedirs(gen_dir, exist_ok=True)
    env = subprocess_env(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    queue, running, failed = [], {}, {}
    for arch, checkpoint in checkpoints.items():
        out = os.path.join(gen_dir, f"{arch}.out")
        if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(checkpoint):
            log(f"translate: skipped {arch}, translated earlier ({gen_dir}/{arch}.out)")
        else:
            queue.append(arch)
    try:
        while queue or running:
            while queue and len(running) < jobs:
                arch = queue.pop(0)
                log(f"translate: {arch}")
                out = open(os.path.join(gen_dir, f"{arch}.out.tmp"), "w")
                err = open(os.path.join(gen_dir, f"{arch}.log"), "w")
                running[arch] = (subprocess.Popen(generate_command(info, checkpoints[arch], generation_flags),
                                                  stdout=out, stderr=err, env=env), out, err)
            for arch, (process, out, err) in list(running.items()):
                if process.poll() is None:
                    continue
                out.close()
                err.close()
                del running[arch]
                if process.returncode == 0:
                    os.replace(os.path.join(gen_dir, f"{arch}.out.tmp"), os.path.join(gen_dir, f"{arch}.out"))
                else:
                    with open(os.path.join(gen_dir, f"{arch}.log"), errors="replace") as f:
                        tail = f.readlines()[-5:]
                    failed[arch] = f"fairseq-generate exit {process.returncode}: " + "".join(tail).strip()
                    log(f"translate: {arch} FAILED, see {gen_dir}/{arch}.log")
            time.sleep(0.2)
    except BaseException:
        for process, out, err in running.values():
            process.terminate()
            process.wait()
        raise
    return failed


def read_output(path, sentences):
    """(hypotheses, references from T- lines) of a fairseq-generate output; "" where skipped."""
    hyps = read_hypotheses(path, "H")
    refs = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("T-"):
                head, _, text = line.rstrip("\n").partition("\t")
                refs[int(head[2:])] = text
    return [hyps.get(i, "") for i in range(sentences)], [refs.get(i) for i in range(sentences)], \
        sorted(set(range(sentences)) - set(hyps))


def model_limits(checkpoint):
    """(source, target) positions a checkpoint's model accepts (fairseq's max_*_positions)."""
    from fairseq import checkpoint_utils

    import posnet_fairseq  # noqa: F401  (allow-lists fairseq's checkpoint classes)

    model = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)["cfg"]["model"]
    # A Namespace (fairseq-train's legacy arguments) or a dict-like config.
    get = model.get if hasattr(model, "get") else lambda key: getattr(model, key)
    return int(get("max_source_positions")), int(get("max_target_positions"))


def paired_scores(named_systems, refs, metrics, samples):
    """sacreBLEU's paired bootstrap: {metric: [{"score", "mean", "ci", "p"} per system]} and signatures."""
    from sacrebleu.significance import PairedTest

    test = PairedTest(named_systems, metrics, [refs], test_type="bs", n_samples=samples)
    signatures, scores = test()
    results = {}
    for name, column in scores.items():
        if name == "System":
            continue
        results[name] = [{key: None if value is None else float(value) for key, value in
                          (("score", r.score), ("mean", r.mean), ("ci", r.ci), ("p", r.p_value))} for r in column]
    return results, {name: str(sig) for name, sig in signatures.items()}


def metrics(force):
    from sacrebleu.metrics import BLEU, CHRF

    # force: the synthetic corpus is space-separated by design (the final "." is a token).
    return {"BLEU": BLEU(force=force)}, {"chrF": CHRF()}


def score(archs, outputs, refs, lengths, src_tokens, tgt_tokens, limits, buckets, train_limit, force,
          samples=1000):
    """The quality part of the results (see the module docstring).

    ``outputs[arch]`` = (hypotheses, skipped ids); ``lengths``: source length of each test sentence
    in the unit of ``buckets`` ([(lo, hi)]) and ``train_limit`` (the longest training length);
    ``src_tokens``/``tgt_tokens``: model tokens, against ``limits[arch]`` = (source, target) positions."""
    bleu, chrf = metrics(force)
    named = [(arch, outputs[arch][0]) for arch in archs]
    overall, signatures = paired_scores(named, refs, {**bleu, **chrf}, samples)
    systems = {}
    # sacreBLEU names the columns after the metric's settings ("BLEU", "chrF2").
    bleu_key, chrf_key = (next(k for k in overall if k.startswith(prefix)) for prefix in ("BLEU", "chrF"))
    for i, arch in enumerate(archs):
        systems[arch] = {"bleu": overall[bleu_key][i], "chrf": overall[chrf_key][i],
                         "skipped": len(outputs[arch][1]), "limits": limits[arch]}
    bucket_rows = []
    for lo, hi in buckets:
        ids = [i for i, n in enumerate(lengths) if lo <= n <= hi]
        row = {"lo": lo, "hi": hi, "sentences": len(ids), "beyond_training": lo > train_limit, "scores": {}}
        if ids:
            # Models that can take no sentence of the bucket are reported, not scored.
            fits = {arch: [i for i in ids if src_tokens[i] < limits[arch][0] and tgt_tokens[i] < limits[arch][1]]
                    for arch in archs}
            scored = [arch for arch in archs if fits[arch]]
            if scored:
                sub = [(arch, [outputs[arch][0][i] for i in ids]) for arch in scored]
                bucket_refs = [refs[i] for i in ids]
                results, _ = paired_scores(sub, bucket_refs, bleu, samples)
                for j, (arch, hyps) in enumerate(sub):
                    skipped = set(outputs[arch][1])
                    # hypothesis / reference length (sacreBLEU's tokens): below 1, the model stopped early
                    plain = bleu["BLEU"].corpus_score(hyps, [bucket_refs])
                    row["scores"][arch] = dict(results[bleu_key][j], skipped=sum(i in skipped for i in ids),
                                               length_ratio=plain.sys_len / max(plain.ref_len, 1))
            for arch in archs:
                if not fits[arch]:
                    row["scores"][arch] = {"beyond": min(limits[arch])}
        bucket_rows.append(row)
    return {"signatures": signatures, "systems": systems, "buckets": bucket_rows, "train_limit": train_limit,
            "baseline": archs[0], "samples": samples}


def references(info, outputs_refs):
    """The raw reference text (synthetic, --raw) or fairseq's post-processed T- lines (--data)."""
    if info["references"]:
        with open(info["references"], encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]
    return outputs_refs


def token_lengths(info):
    """(source, target) model tokens of every test sentence, EOS excluded."""
    return (data.split_lengths(info["data_bin"], "test", info["source_lang"], info["target_lang"]),
            data.split_lengths(info["data_bin"], "test", info["source_lang"], info["target_lang"],
                               info["target_lang"]))
