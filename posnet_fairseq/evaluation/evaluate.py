"""Score one fairseq-generate output the way the papers report it, and say which way.

    python -m posnet_fairseq.evaluation.evaluate --generate-output GEN --stats DATA/stats.json
        --split test --out-dir DIR [--checkpoint CKPT] [--row NAME] [--baseline NAME=DIR ...]
        [--generate-log LOG] [--train-log LOG] [--sacrebleu-tokenize TOK] [--meteor]
        [--comet-model PATH --comet-python PY] [--bleurt-model PATH --bleurt-python PY]

How to score is read from the "eval" section the data recipe wrote into
stats.json: the target language, how to detokenize (``moses`` after
``--remove-bpe``, or ``none`` after ``--post-process sentencepiece``), the
sacreBLEU tokenizer (13a, or zh for Chinese), lowercasing (IWSLT De-En),
whether to add compound-split BLEU (En-De), whether tokenized BLEU means
anything (not for SentencePiece Chinese: ``tokenized_bleu: false``), and per test split the raw
source/reference files and the tokenized reference (what fairseq's T- lines
hold, but without <unk>). Reported, each with its signature:

* ``sacrebleu``: detokenized hypotheses against the raw references (real
  sacreBLEU; ``--sacrebleu-tokenize`` overrides the data's tokenizer, e.g.
  ``intl`` for the hard-coded Gaussian paper);
* ``bleu_tok``: tokenized BLEU, hypotheses after BPE removal against the
  tokenized reference, no smoothing (= multi-bleu.perl / fairseq-generate BLEU4);
* ``bleu_compound_split``: tokenized BLEU after ##AT##-##AT## splitting of
  hyphenated compounds (fairseq's compound_split_bleu.sh; AIAYN-style En-De);
* ``chrf``: chrF2 on detokenized text;
* ``meteor`` (``--meteor``): nltk's METEOR on the tokenized text, see :mod:`.meteor` (not meteor-1.5);
* ``comet`` / ``bleurt``: optional, see :mod:`.hooks` (sentence scores in DIR/comet.scores, DIR/bleurt.scores);
* ``decode_seconds``: fairseq-generate's own timing of the translation (``--generate-log``, its stderr);
* ``train_wps``: training speed in target tokens per second (``--train-log``, fairseq's log file);
* ``significance``: paired bootstrap against each ``--baseline NAME=DIR`` (an
  evaluated output directory), in both directions, for sacreBLEU, tokenized
  BLEU and, where both sides have sentence scores, COMET, BLEURT and METEOR.

Sentences fairseq-generate skipped (longer than the model allows) count as
empty hypotheses and are reported as ``missing``. Writes DIR/result.json and
DIR/hyp.{detok,tok}.
"""
import argparse
import json
import os
import re
import sys

from ..fairseq_log import decode_seconds, train_speed
from . import bootstrap, generate_output, hooks, meteor

THRESHOLD = 0.05  # two-sided (bootstrap.significance); the PosNet paper's one-sided p <= 0.05 each way is 10%
SENTENCE_SCORED = ("comet", "bleurt", "meteor")  # metrics whose sentence scores the bootstrap resamples
_COMPOUND = re.compile(r"(\S)-(\S)")


def compound_split(line):
    """perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g', as fairseq's compound_split_bleu.sh."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def detokenize(lines, lang, method):
    if method == "none":
        return list(lines)
    if method != "moses":
        raise ValueError(f"detok {method!r}: expected moses or none")
    from sacremoses import MosesDetokenizer

    detok = MosesDetokenizer(lang=lang)
    return [detok.detokenize(line.split()) for line in lines]


def count_parameters(checkpoint, data_bin=None):
    """Parameters of the checkpoint's model as fairseq builds it (tied embeddings are one parameter; buffers
    such as fairseq's version counters are not parameters). ``data_bin``: where the model's dictionaries are,
    when not where it was trained."""
    from fairseq import checkpoint_utils

    overrides = {"data": data_bin} if data_bin else None
    models, _ = checkpoint_utils.load_model_ensemble([checkpoint], arg_overrides=overrides)
    return sum(p.numel() for p in models[0].parameters())


def _read(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def _write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def score(hyp_tok, hyp_detok, ref_tok, ref_raw, conf):
    from sacrebleu.metrics import BLEU, CHRF

    lowercase = bool(conf.get("lowercase", False))
    result = {}
    sacre = BLEU(tokenize=conf.get("sacrebleu_tokenize", "13a"), lowercase=lowercase)
    s = sacre.corpus_score(hyp_detok, [ref_raw])
    result["sacrebleu"] = {"score": round(s.score, 2), "signature": str(sacre.get_signature()),
                           "text": str(s)}
    tok = bootstrap.make_metric("bleu-nosmooth", "none", lowercase)
    if conf.get("tokenized_bleu", True):
        s = tok.corpus_score(hyp_tok, [ref_tok])
        result["bleu_tok"] = {"score": round(s.score, 2), "text": str(s),
                              "signature": "tokenized BLEU (multi-bleu.perl equivalent): " + str(tok.get_signature())}
    if conf.get("compound_split"):
        s = tok.corpus_score([compound_split(h) for h in hyp_tok], [[compound_split(r) for r in ref_tok]])
        result["bleu_compound_split"] = {"score": round(s.score, 2), "text": str(s),
                                         "signature": "compound-split tokenized BLEU: " + str(tok.get_signature())}
    chrf = CHRF(lowercase=lowercase)
    s = chrf.corpus_score(hyp_detok, [ref_raw])
    result["chrf"] = {"score": round(s.score, 2), "signature": str(chrf.get_signature()), "text": str(s)}
    return result


def _scores(path):
    return [float(x) for x in _read(path)] if os.path.exists(path) else None


def significance(out_dir, baseline_dir, hyp_tok, hyp_detok, ref_tok, ref_raw, conf, samples, seed):
    """Paired bootstrap of this output against one baseline's output directory, per metric, both directions."""
    lowercase = bool(conf.get("lowercase", False))
    base_tok, base_detok = _read(os.path.join(baseline_dir, "hyp.tok")), _read(os.path.join(baseline_dir, "hyp.detok"))
    sacre = bootstrap.make_metric("bleu", conf.get("sacrebleu_tokenize", "13a"), lowercase)
    tok = bootstrap.make_metric("bleu-nosmooth", "none", lowercase)
    sig = {"baseline": os.path.relpath(baseline_dir, out_dir), "threshold": THRESHOLD}
    tests = [("sacrebleu", lambda: bootstrap.paired_bootstrap(sacre, hyp_detok, base_detok, ref_raw, samples, seed))]
    if conf.get("tokenized_bleu", True):
        tests.append(("bleu_tok", lambda: bootstrap.paired_bootstrap(tok, hyp_tok, base_tok, ref_tok, samples, seed)))
    for metric in SENTENCE_SCORED:
        ours = _scores(os.path.join(out_dir, f"{metric}.scores"))
        theirs = _scores(os.path.join(baseline_dir, f"{metric}.scores"))
        if ours is not None and theirs is not None:
            tests.append((metric, lambda a=ours, b=theirs: bootstrap.paired_bootstrap_means(a, b, samples, seed)))
    for name, run in tests:
        res = run()
        res["direction"] = bootstrap.significance(res, THRESHOLD)
        res["significant"] = res["direction"] is not None
        sig[name] = res
    return sig


def _learned_metrics(args, conf, hyp_tok, ref_tok, src_path, hyp_path, ref_path):
    """{metric: its result} of the metrics the flags ask for besides BLEU and chrF: METEOR, COMET, BLEURT."""
    learned = {}
    if args.meteor:
        if conf.get("tokenized_bleu", True):
            learned["meteor"] = meteor.meteor(hyp_tok, ref_tok, conf["target_lang"])
        else:
            learned["meteor"] = meteor._unavailable(f"the {conf['target_lang']} test set has no word tokenization")
    if args.comet_model or args.comet_python:
        learned["comet"] = hooks.comet(args.comet_model, args.comet_python, src_path, hyp_path, ref_path)
    if args.bleurt_model or args.bleurt_python:
        learned["bleurt"] = hooks.bleurt(args.bleurt_model, args.bleurt_python, hyp_path, ref_path)
    return learned


def evaluate(args):
    with open(args.stats, encoding="utf-8") as f:
        stats = json.load(f)
    conf = stats.get("eval")
    if conf is None:
        raise ValueError(f"{args.stats} has no 'eval' section: re-run the data recipe")
    if args.sacrebleu_tokenize:
        conf = dict(conf, sacrebleu_tokenize=args.sacrebleu_tokenize)
    if args.split not in conf["test_sets"]:
        raise ValueError(f"--split {args.split}: {args.stats} describes {sorted(conf['test_sets'])}")
    test = conf["test_sets"][args.split]
    base = os.path.dirname(os.path.abspath(args.stats))
    ref_raw = _read(os.path.join(base, test["raw_ref"]))
    ref_tok = _read(os.path.join(base, test["tok_ref"]))
    src_raw = _read(os.path.join(base, test["raw_source"]))
    if not (len(ref_raw) == len(ref_tok) == len(src_raw)):
        raise ValueError(f"test set {args.split}: raw ref {len(ref_raw)}, tokenized ref {len(ref_tok)} and "
                         f"source {len(src_raw)} lines differ")
    hyps = generate_output.read(args.generate_output).hypotheses
    if not hyps:
        raise ValueError(f"{args.generate_output}: no H- lines (is it fairseq-generate output?)")
    bad = [i for i in hyps if i >= len(ref_raw)]
    if bad:
        raise ValueError(f"{args.generate_output}: sentence id {bad[0]} but the test set has {len(ref_raw)} lines")
    baselines = dict(_baseline(b) for b in args.baseline or [])
    hyp_tok = [hyps.get(i, "") for i in range(len(ref_raw))]
    hyp_detok = detokenize(hyp_tok, conf["target_lang"], conf.get("detok", "moses"))
    os.makedirs(args.out_dir, exist_ok=True)
    _write(os.path.join(args.out_dir, "hyp.tok"), hyp_tok)
    _write(os.path.join(args.out_dir, "hyp.detok"), hyp_detok)

    result = {"row": args.row, "split": args.split, "test_set": test.get("name", args.split),
              "sentences": len(ref_raw), "missing": len(ref_raw) - len(hyps)}
    result.update(score(hyp_tok, hyp_detok, ref_tok, ref_raw, conf))
    if args.checkpoint:
        result["params"] = count_parameters(args.checkpoint, os.path.join(base, "data-bin"))
    if args.generate_log:
        result["decode_seconds"] = decode_seconds(args.generate_log)
    if args.train_log:
        result["train_wps"] = train_speed(args.train_log)
    hyp_path = os.path.join(args.out_dir, "hyp.detok")
    ref_path, src_path = os.path.join(base, test["raw_ref"]), os.path.join(base, test["raw_source"])
    for metric, res in _learned_metrics(args, conf, hyp_tok, ref_tok, src_path, hyp_path, ref_path).items():
        scores = res.pop("scores", None)
        if scores is not None:
            _write(os.path.join(args.out_dir, f"{metric}.scores"), [repr(x) for x in scores])
        result[metric] = res
    for name, directory in baselines.items():
        if not os.path.exists(os.path.join(directory, "hyp.detok")):
            print(f"note: baseline {name} ({directory}) has no output yet: significance against it not computed")
            result.setdefault("significance_skipped", {})[name] = f"{directory} had no output"
            continue
        result.setdefault("significance", {})[name] = significance(
            args.out_dir, directory, hyp_tok, hyp_detok, ref_tok, ref_raw, conf, args.bootstrap_samples, args.seed)
    with open(os.path.join(args.out_dir, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")
    return result


def _baseline(spec):
    name, sep, directory = spec.partition("=")
    if not sep or not name or not directory:
        raise ValueError(f"--baseline {spec}: expected NAME=DIR (the baseline row's name and its output directory)")
    return name, directory


def summary(result):
    lines = [f"{result.get('row') or ''} {result['test_set']}: {result['sentences']} sentences"
             + (f", {result['missing']} skipped by fairseq-generate (scored as empty)" if result["missing"] else "")]
    for key in ("sacrebleu", "bleu_tok", "bleu_compound_split", "chrf"):
        if key in result:
            lines.append(f"  {key:20s} {result[key]['score']:6.2f}  {result[key]['signature']}")
    for key in SENTENCE_SCORED:
        if key in result:
            r = result[key]
            lines.append(f"  {key:20s} " + (f"{r['score']:.4f}" if r["available"] else f"unavailable ({r['reason']})"))
    if "params" in result:
        lines.append(f"  params               {result['params']:,}")
    if "decode_seconds" in result:
        lines.append(f"  decoding             {result['decode_seconds']['seconds']:.1f} s (fairseq-generate's timing)")
    if "train_wps" in result:
        lines.append(f"  training             {result['train_wps']['wps']:,.0f} target tokens/s (median)")
    for name, sig in result.get("significance", {}).items():
        for key in ("sacrebleu", "bleu_tok") + SENTENCE_SCORED:
            if key not in sig:
                continue
            s = sig[key]
            mark = f" (significantly {s['direction']}, two-sided p <= {sig['threshold']})" if s["significant"] else ""
            lines.append(f"  vs {name} ({key}): {s['system']:.2f} vs {s['baseline']:.2f}, p(not better) = "
                         f"{s['p_value']:.4f}, p(not worse) = {s['p_value_worse']:.4f}{mark}")
    return "\n".join(lines)


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generate-output", required=True, help="stdout of fairseq-generate")
    parser.add_argument("--stats", required=True, help="stats.json written by the data recipe")
    parser.add_argument("--split", default="test")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--row", default=None, help="row name recorded in result.json")
    parser.add_argument("--checkpoint", help="count the model's parameters")
    parser.add_argument("--baseline", action="append", metavar="NAME=DIR",
                        help="a baseline row and its evaluated output directory (paired bootstrap); repeatable")
    parser.add_argument("--generate-log", help="fairseq-generate's stderr: its translation time is recorded")
    parser.add_argument("--train-log", help="fairseq-train's --log-file: its speed (target tokens/s) is recorded")
    parser.add_argument("--sacrebleu-tokenize", help="sacreBLEU tokenizer instead of the data's (e.g. intl)")
    parser.add_argument("--meteor", action="store_true", help="add METEOR (nltk's, offline; see evaluation/meteor.py)")
    parser.add_argument("--bootstrap-samples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--comet-model")
    parser.add_argument("--comet-python")
    parser.add_argument("--bleurt-model")
    parser.add_argument("--bleurt-python")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = evaluate(args)
    except (ValueError, FileNotFoundError, KeyError) as err:
        parser.error(str(err))
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
