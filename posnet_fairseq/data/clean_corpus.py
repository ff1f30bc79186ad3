"""Length and length-ratio filter for a parallel corpus (what Moses' clean-corpus-n.perl does).

A pair is kept when, after stripping and squeezing whitespace, both sides
have between MIN and MAX tokens and neither side is more than RATIO times
longer than the other; a pair with an empty side is always dropped. Kept lines are written whitespace-normalised.

    python -m posnet_fairseq.data.clean_corpus CORPUS L1 L2 OUT MIN MAX [--ratio 1.5]

reads CORPUS.L1 / CORPUS.L2 and writes OUT.L1 / OUT.L2.
"""
import argparse
import sys


def normalise(line):
    return " ".join(line.split())


def keep_pair(src, tgt, min_len, max_len, ratio=None):
    """True when both token counts lie in [min_len, max_len] and their ratio is at most ``ratio``."""
    n_src, n_tgt = len(src.split()), len(tgt.split())
    if not (min_len <= n_src <= max_len and min_len <= n_tgt <= max_len):
        return False
    if ratio is not None and n_src and n_tgt and (n_src / n_tgt > ratio or n_tgt / n_src > ratio):
        return False
    # An empty side has no defined ratio: such pairs are dropped even with MIN 0.
    return n_src > 0 and n_tgt > 0


def clean_corpus(corpus, l1, l2, out, min_len, max_len, ratio=None):
    """Filters CORPUS.{l1,l2} into OUT.{l1,l2}; returns (kept, total)."""
    kept = total = 0
    with open(f"{corpus}.{l1}", encoding="utf-8") as f1, open(f"{corpus}.{l2}", encoding="utf-8") as f2, \
            open(f"{out}.{l1}", "w", encoding="utf-8") as o1, open(f"{out}.{l2}", "w", encoding="utf-8") as o2:
        for total, (a, b) in enumerate(zip(f1, f2, strict=True), start=1):
            a, b = normalise(a), normalise(b)
            if keep_pair(a, b, min_len, max_len, ratio):
                o1.write(a + "\n")
                o2.write(b + "\n")
                kept += 1
    return kept, total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("l1")
    parser.add_argument("l2")
    parser.add_argument("out")
    parser.add_argument("min_len", type=int)
    parser.add_argument("max_len", type=int)
    parser.add_argument("--ratio", type=float, default=None, help="maximum length ratio either way")
    args = parser.parse_args(argv)
    if args.min_len < 0 or args.max_len < args.min_len:
        parser.error(f"MIN {args.min_len} / MAX {args.max_len}: need 0 <= MIN <= MAX")
    if args.ratio is not None and args.ratio < 1:
        parser.error(f"--ratio {args.ratio}: must be at least 1")
    try:
        kept, total = clean_corpus(args.corpus, args.l1, args.l2, args.out, args.min_len, args.max_len, args.ratio)
    except ValueError as err:  # zip(strict=True): the two sides differ in length
        parser.error(f"{args.corpus}.{args.l1} and {args.corpus}.{args.l2} have different line counts ({err})")
    print(f"clean_corpus: kept {kept} of {total} pairs -> {args.out}.{{{args.l1},{args.l2}}}", file=sys.stderr)


if __name__ == "__main__":
    main()
