"""Deterministic synthetic parallel corpus: a toy English-like source language
and an invented verb-final target language.

The corpus exists so that the quick start and the end-to-end tests can train
and score a translation model without downloading anything.  Every target
sentence is a deterministic function of its source sentence, so a good model
can approach BLEU 100, while each transfer rule (:mod:`.synth_grammar`)
needs a particular ability from the token mixer (local reordering,
content-dependent agreement, long-distance movement).  Everything is drawn
from ``random.Random(seed)``: the same seed and flags give byte-identical
files.

Command line::

    python -m posnet_fairseq.data.synth --out-dir data/synth [--seed 1] \\
        [--train 20000] [--valid 500] [--test 500] [--max-len 60] \\
        [--test-max-len 50 [--test-buckets 5]] [--src-lang src] [--tgt-lang tgt]

writes ``DIR/{train,valid,test}.{src,tgt}``: one sentence per line, lowercase,
space-tokenised, ending in a "." token.

The words are :mod:`.synth_lexicon`'s; the grammar, and the transfer rules
that render a sentence, are :mod:`.synth_grammar`'s; this module draws the
corpus from them.  Sentences whose source or target exceed ``max_len`` tokens
are redrawn; test, valid and train sentences are distinct.
With the defaults, train sentences average about 12.9 source and 15.8 target
tokens (src/tgt ratio 0.82); about 2.5% of sources are longer than 30 tokens.

Length generalisation: ``--test-max-len N`` (``write_corpus(test_max_len=N)``)
keeps ``--max-len`` for train and valid only and makes the test set
length-stratified: the same number of pairs in each of ``--test-buckets``
equal-width source-length buckets up to N tokens.  To reach long buckets
cheaply, test sentences get a clause count drawn uniformly up to N / 4 (the
grammar draws at most three): longer test sentences hold more coordinated
clauses, each drawn from the same grammar.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
from typing import Optional, Sequence

from .synth_grammar import P_CLAUSES, render, sample_sentence

# A clause with an intransitive verb and a bare noun is 4 source / 5 target
# tokens; below 10 the length filter would reject nearly every draw.
MIN_MAX_LEN = 10


def generate_pairs(n: int, seed: int, max_len: int = 60,
                   exclude: frozenset = frozenset()) -> list[tuple[str, str]]:
    """Return ``n`` pairs with distinct source sentences, both sides at most ``max_len`` tokens.

    The output for ``n`` is a prefix of the output for any larger ``n``.
    Source sentences in ``exclude`` are never returned.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if max_len < MIN_MAX_LEN:
        raise ValueError(f"max_len must be at least {MIN_MAX_LEN}, got {max_len}")
    rng = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set(exclude)
    # The language is far larger than any requested corpus, so running out of
    # new sentences means a caller asked for something unreasonable.
    budget = 100 * n + 1000
    while len(pairs) < n:
        if budget == 0:
            raise RuntimeError(f"could not draw {n} distinct sentences of at most {max_len} tokens")
        budget -= 1
        src, tgt = render(sample_sentence(rng))
        if src in seen or max(len(src.split()), len(tgt.split())) > max_len:
            continue
        seen.add(src)
        pairs.append((src, tgt))
    return pairs


def length_buckets(max_len: int, count: int) -> list[tuple[int, int]]:
    """``count`` source-length buckets ``(lo, hi)`` (inclusive) of equal width covering 1..``max_len``."""
    if count < 1 or max_len < count:
        raise ValueError(f"cannot split lengths 1..{max_len} into {count} buckets")
    edges = [round(i * max_len / count) for i in range(count + 1)]
    return [(edges[i] + 1, edges[i + 1]) for i in range(count)]


# Shortest clause: "the dog sleeps" plus a conjunction; sentences of up to
# max_len // TOKENS_PER_SHORT_CLAUSE clauses can still land in every bucket.
TOKENS_PER_SHORT_CLAUSE = 4


def generate_bucketed_pairs(per_bucket: Sequence[int], buckets: Sequence[tuple[int, int]], seed: int,
                            exclude: frozenset = frozenset()) -> list[tuple[str, str]]:
    """Pairs with distinct sources, ``per_bucket[i]`` of them with a source length in ``buckets[i]``.

    Sentences longer than the grammar's usual three clauses are rare (about
    0.3% of sources exceed 40 tokens), so the number of clauses is drawn
    uniformly from 1 to the most that fit the longest bucket; the clauses
    themselves follow the grammar as usual. Pairs come out bucket by bucket.
    """
    if len(per_bucket) != len(buckets):
        raise ValueError(f"{len(per_bucket)} bucket sizes for {len(buckets)} buckets")
    longest = max(hi for _, hi in buckets)
    max_clauses = max(len(P_CLAUSES), longest // TOKENS_PER_SHORT_CLAUSE)
    rng = random.Random(seed)
    found: list[list[tuple[str, str]]] = [[] for _ in buckets]
    seen: set[str] = set(exclude)
    budget = 2000 * sum(per_bucket) + 1000
    while any(len(f) < n for f, n in zip(found, per_bucket)):
        if budget == 0:
            missing = [f"{lo}-{hi}" for (lo, hi), f, n in zip(buckets, found, per_bucket) if len(f) < n]
            raise RuntimeError(f"could not draw enough distinct sentences with source lengths {', '.join(missing)}")
        budget -= 1
        src, tgt = render(sample_sentence(rng, rng.randint(1, max_clauses)))
        length = len(src.split())
        for (lo, hi), f, n in zip(buckets, found, per_bucket):
            if lo <= length <= hi and len(f) < n and src not in seen:
                seen.add(src)
                f.append((src, tgt))
    return [pair for f in found for pair in f]


def write_corpus(out_dir, train: int = 20000, valid: int = 500, test: int = 500, seed: int = 1,
                 max_len: int = 60, src_lang: str = "src", tgt_lang: str = "tgt",
                 test_max_len: Optional[int] = None, test_buckets: int = 5) -> dict:
    """Write ``{train,valid,test}.{src_lang,tgt_lang}`` into ``out_dir`` and return stats.

    Test and valid are drawn first from one stream of distinct sentences, so
    they do not change with ``train`` and never overlap it.  The stats dict
    holds the pairs per split and, over all splits, ``mean_src_len``,
    ``mean_tgt_len`` (tokens, "." included) and ``src_tgt_ratio``.

    Length control (for measuring length generalisation): with
    ``test_max_len``, ``max_len`` limits the train and valid pairs only and
    the test set is length-stratified instead: ``test`` pairs spread evenly
    over ``test_buckets`` equal-width source-length buckets covering
    1..``test_max_len`` (:func:`generate_bucketed_pairs`, its own random
    stream, seed + 1), so buckets beyond ``max_len`` hold sentences longer
    than any training sentence.
    """
    if test_max_len is None:
        pairs = generate_pairs(test + valid + train, seed, max_len)
        test_pairs, rest = pairs[:test], pairs[test:]
    else:
        buckets = length_buckets(test_max_len, test_buckets)
        per_bucket = [test // test_buckets + (i < test % test_buckets) for i in range(test_buckets)]
        test_pairs = generate_bucketed_pairs(per_bucket, buckets, seed + 1)
        rest = generate_pairs(valid + train, seed, max_len, frozenset(src for src, _ in test_pairs))
    splits = {"test": test_pairs, "valid": rest[:valid], "train": rest[valid:]}
    os.makedirs(out_dir, exist_ok=True)
    for split, split_pairs in splits.items():
        for side, lang in enumerate((src_lang, tgt_lang)):
            path = os.path.join(out_dir, f"{split}.{lang}")
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.writelines(pair[side] + "\n" for pair in split_pairs)
    pairs = test_pairs + rest
    src_tokens = sum(len(src.split()) for src, _ in pairs)
    tgt_tokens = sum(len(tgt.split()) for _, tgt in pairs)
    return {
        "train": train, "valid": valid, "test": test,
        "mean_src_len": round(src_tokens / len(pairs), 2),
        "mean_tgt_len": round(tgt_tokens / len(pairs), 2),
        "src_tgt_ratio": round(src_tokens / tgt_tokens, 3),
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="posnet-synth",
        description="Write a deterministic synthetic parallel corpus "
                    "(grammar: see posnet_fairseq/data/synth_grammar.py).")
    parser.add_argument("--out-dir", required=True, help="directory for {train,valid,test}.{src,tgt}")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--train", type=int, default=20000, help="training pairs")
    parser.add_argument("--valid", type=int, default=500, help="validation pairs")
    parser.add_argument("--test", type=int, default=500, help="test pairs")
    parser.add_argument("--max-len", type=int, default=60,
                        help=f"maximum tokens per side (with --test-max-len: of train and valid pairs), "
                        f"at least {MIN_MAX_LEN}")
    parser.add_argument("--test-max-len", type=int, default=None,
                        help="length-stratified test set: source lengths 1..N in --test-buckets equal "
                        "buckets, the same number of pairs in each (default: test pairs like train pairs)")
    parser.add_argument("--test-buckets", type=int, default=5,
                        help="source-length buckets of the test set with --test-max-len (default 5)")
    parser.add_argument("--src-lang", default="src", help="file suffix of the source side")
    parser.add_argument("--tgt-lang", default="tgt", help="file suffix of the target side")
    args = parser.parse_args(argv)
    for flag in ("train", "valid", "test"):
        if getattr(args, flag) <= 0:
            parser.error(f"--{flag} must be a positive number of pairs, got {getattr(args, flag)}")
    if args.max_len < MIN_MAX_LEN:
        parser.error(f"--max-len must be at least {MIN_MAX_LEN}, got {args.max_len}")
    if args.test_max_len is not None:
        if args.test_buckets < 1 or args.test_max_len < MIN_MAX_LEN * args.test_buckets // 2:
            parser.error(f"--test-max-len {args.test_max_len} with --test-buckets {args.test_buckets}: "
                         f"need at least 1 bucket and buckets at least {MIN_MAX_LEN // 2} tokens wide")
        if args.test < args.test_buckets:
            parser.error(f"--test {args.test}: need at least one pair per bucket (--test-buckets {args.test_buckets})")
    for flag in ("src_lang", "tgt_lang"):
        value = getattr(args, flag)
        if not value or not value.replace("_", "").replace("-", "").isalnum():
            parser.error(f"--{flag.replace('_', '-')} must be a non-empty file suffix "
                         f"of letters, digits, '-' or '_', got {value!r}")
    if args.src_lang == args.tgt_lang:
        parser.error("--src-lang and --tgt-lang must differ")
    stats = write_corpus(args.out_dir, train=args.train, valid=args.valid, test=args.test,
                         seed=args.seed, max_len=args.max_len,
                         src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                         test_max_len=args.test_max_len, test_buckets=args.test_buckets)
    print(f"posnet-synth: wrote {args.out_dir}: " + ", ".join(f"{k}={v}" for k, v in stats.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
