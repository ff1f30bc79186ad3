"""``stats.json`` of a binarized corpus: pairs per split, vocabulary sizes, mean lengths and gamma.

    python -m posnet_fairseq.data.stats DATA_BIN -s SRC -t TGT --out stats.json
        [--eval-json EVAL.json] [--set key=value ...]

Lengths are in BPE tokens without the EOS fairseq appends, over the training
split. ``length_ratio`` (gamma, used by cross-attention mixers) comes from
:func:`posnet_fairseq.data.length_ratio.length_ratio`, the same function the model
uses, so the recipe and the checkpoint agree. ``--eval-json`` merges a file
describing how to score the test sets (see :mod:`.evaluate`) under "eval".
"""
import argparse
import json
import os

from . import length_ratio as gamma


def _split_names(data_bin, src, tgt):
    names = set()
    for fname in os.listdir(data_bin):
        for pair in (f"{src}-{tgt}", f"{tgt}-{src}"):
            suffix = f".{pair}.{src}.idx"
            if fname.endswith(suffix):
                names.add(fname[: -len(suffix)])
    return sorted(names, key=lambda n: (n != "train", n != "valid", n))


def _sizes(data_bin, split, src, tgt, lang):
    from fairseq.data import data_utils

    for pair in (f"{src}-{tgt}", f"{tgt}-{src}"):
        prefix = os.path.join(data_bin, f"{split}.{pair}.{lang}")
        if os.path.exists(prefix + ".idx"):
            dataset = data_utils.load_indexed_dataset(prefix, None)
            # a copy: the sizes view dies with the dataset's memory map
            return dataset.sizes.copy()
    raise FileNotFoundError(f"no binarized {split} data for {lang} in {data_bin}")


def _vocab_size(data_bin, lang):
    from fairseq.data import Dictionary

    return len(Dictionary.load(os.path.join(data_bin, f"dict.{lang}.txt")))


def corpus_stats(data_bin, src, tgt):
    splits = _split_names(data_bin, src, tgt)
    if "train" not in splits:
        raise FileNotFoundError(f"no binarized train split for {src}-{tgt} in {data_bin}")
    stats = {"source_lang": src, "target_lang": tgt, "pairs": {}}
    for split in splits:
        stats["pairs"][split] = int(len(_sizes(data_bin, split, src, tgt, src)))
    src_sizes, tgt_sizes = (_sizes(data_bin, "train", src, tgt, lang) for lang in (src, tgt))
    n = len(src_sizes)
    stats["vocab"] = {src: _vocab_size(data_bin, src), tgt: _vocab_size(data_bin, tgt)}
    stats["joined_dictionary"] = _same_file(os.path.join(data_bin, f"dict.{src}.txt"),
                                            os.path.join(data_bin, f"dict.{tgt}.txt"))
    stats["mean_source_length"] = round(float(src_sizes.sum() - n) / n, 4)
    stats["mean_target_length"] = round(float(tgt_sizes.sum() - n) / n, 4)
    stats["length_ratio"] = round(gamma.length_ratio(data_bin, src, tgt), 6)
    return stats


def _same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_bin")
    parser.add_argument("-s", "--source-lang", required=True)
    parser.add_argument("-t", "--target-lang", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--eval-json", help="JSON file describing the test sets, stored under 'eval'")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra top-level string fields (e.g. bpe=subword-nmt-10000)")
    args = parser.parse_args(argv)
    try:
        stats = corpus_stats(args.data_bin, args.source_lang, args.target_lang)
    except FileNotFoundError as err:
        parser.error(str(err))
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set {item}: expected KEY=VALUE")
        stats[key] = value
    if args.eval_json:
        with open(args.eval_json, encoding="utf-8") as f:
            stats["eval"] = json.load(f)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=2, sort_keys=True)
        f.write("\n")
    print(json.dumps({k: stats[k] for k in ("pairs", "vocab", "length_ratio")}))


if __name__ == "__main__":
    main()
