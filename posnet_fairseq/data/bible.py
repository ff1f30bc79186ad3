"""Verse-aligned Spanish-English pairs from two SWORD Bible modules, whole books held out as valid and
test, in canonical (document) order, with ``stats.json``; docs/bible-corpus.md.

    python -m posnet_fairseq.data.bible --out-dir DIR [--stats FILE] [--sword-path PATH ...]
        [--source-module spaRV1909eb] [--target-module engWEB2015eb]
        [--valid-books Eccl,Jonah,Gal] [--test-books Ruth,Lam,John,Rom] [--spm-vocab N --spm-dir DIR]

writes DIR/{train,valid,test}.{SRC,TGT} (one verse a line, parallel) and DIR/{split}.ref (its reference,
e.g. John.3.16). Lines follow the books' canonical order, so consecutive lines of a split are
consecutive verses wherever no verse was skipped between them (``.ref`` says where).

A pair is the two modules' verses of one (book, chapter, verse) key. Skipped, and counted in stats.json
under "skipped" with the reason:

* a key of one module's versification that the other's lacks (the WEB's NRSVA versification has the
  deuterocanonical books, the Reina-Valera's KJV one does not);
* a verse empty on either side (a translation that moves or omits a verse leaves its key empty);
* a chapter whose verses the modules number differently: a module keeps its source's numbering inside
  its versification's slots (the Reina-Valera's Jonah 2:1 is the English Jonah 1:17), so every pair of
  such a chapter pairs different verses. Length betrays it, as in Gale & Church 1993 ("A program for
  aligning sentences in bilingual corpora"): the chapter's mean |z| of its pairs' log character-length
  ratios, z standardised by the corpus median and MAD, is above CHAPTER_Z;
* a single pair whose lengths disagree (one side holds text the other puts elsewhere or omits, e.g.
  the Reina-Valera's subscriptions to the letters): Gale & Church's length deviation, standardised
  the same way, above PAIR_Z.
"""
import argparse
import json
import math
import os
import statistics
from collections import Counter, defaultdict

from . import sentencepiece_model, sword_text

SOURCE_MODULE = "spaRV1909eb"  # Reina-Valera 1909 (Debian sword-text-sparv)
TARGET_MODULE = "engWEB2015eb"  # World English Bible (Debian sword-text-web)
# Held-out books (docs/bible-corpus.md): each of a genre that training also has, none with a close
# parallel in training (no synoptic Gospel, no Chronicles): wisdom, prophetic narrative and a Pauline
# letter for validation; narrative, poetry, a Gospel and a letter for the test (about 1,500 verses).
VALID_BOOKS = ("Eccl", "Jonah", "Gal")
TEST_BOOKS = ("Ruth", "Lam", "John", "Rom")
# On the Reina-Valera and the WEB, an aligned chapter's mean |z| is at most 1.6, a misnumbered one's at
# least 2.0 (docs/bible-corpus.md).
CHAPTER_Z = 1.8
PAIR_Z = 4.0
SPLITS = ("train", "valid", "test")
REFS_LISTED = 100  # a reason's references are listed in stats.json up to this many verses


def _ref(key):
    return "{}.{}.{}".format(*key)


def align(source, target):
    """Pairs (key, source text, target text) of two lists of (key, plain text), in the source's order, and
    {reason: [keys skipped]}."""
    target_text = dict(target)
    source_keys = {key for key, _ in source}
    skipped = defaultdict(list)
    pairs = []
    for key, src in source:
        if key not in target_text:
            skipped["only in the source's versification"].append(key)
            continue
        tgt = target_text[key]
        if not src or not tgt:
            reason = "empty in both" if not src and not tgt else "empty in the source" if not src else \
                "empty in the target"
            skipped[reason].append(key)
            continue
        pairs.append((key, src, tgt))
    skipped["only in the target's versification"] = [key for key, _ in target if key not in source_keys]
    return pairs, skipped


def _robust_z(values):
    """(value - median) / (1.4826 MAD): standard scores that a few misaligned pairs do not inflate."""
    median = statistics.median(values)
    spread = 1.4826 * statistics.median(abs(v - median) for v in values) or 1.0
    return [(v - median) / spread for v in values], median, spread


def check_lengths(pairs):
    """(pairs kept, {reason: [keys dropped]}, the length model) after the chapter and the pair check of the
    module docstring."""
    log_ratio_z, median, spread = _robust_z([math.log(len(src) / len(tgt)) for _, src, tgt in pairs])
    by_chapter = defaultdict(list)
    for (key, _, _), z in zip(pairs, log_ratio_z):
        by_chapter[key[:2]].append(abs(z))
    misnumbered = {chapter for chapter, zs in by_chapter.items() if statistics.mean(zs) > CHAPTER_Z}
    # Gale & Church's statistic: the target length's deviation from c x source length grows as the square
    # root of the length, so short verses ("No matarás." / "You shall not murder.") are not outliers.
    c = sum(len(tgt) for _, _, tgt in pairs) / sum(len(src) for _, src, _ in pairs)
    gale_church_z, _, _ = _robust_z([(len(tgt) - c * len(src)) / math.sqrt(len(src)) for _, src, tgt in pairs])
    kept, dropped = [], defaultdict(list)
    for pair, z in zip(pairs, gale_church_z):
        if pair[0][:2] in misnumbered:
            dropped["chapter numbered differently"].append(pair[0])
        elif abs(z) > PAIR_Z:
            dropped["length outlier"].append(pair[0])
        else:
            kept.append(pair)
    model = {"log_char_ratio_median": round(median, 4), "log_char_ratio_sd": round(spread, 4), "chapter_z": CHAPTER_Z,
             "target_chars_per_source_char": round(c, 4), "pair_z": PAIR_Z,
             "chapters_numbered_differently": sorted("{}.{}".format(*chapter) for chapter in misnumbered)}
    return kept, dropped, model


def split_books(pairs, valid_books, test_books):
    """{split: pairs}: the pairs of ``valid_books`` and ``test_books`` (OSIS names) held out, whole books, the
    rest trains; each keeps the canonical order. A book named twice, or with no pair, raises ValueError
    naming its flag."""
    books = list(dict.fromkeys(key[0] for key, _, _ in pairs))
    both = set(valid_books) & set(test_books)
    if both:
        raise ValueError(f"--valid-books and --test-books both name {', '.join(sorted(both))}")
    for flag, names in (("--valid-books", valid_books), ("--test-books", test_books)):
        missing = [name for name in names if name not in books]
        if missing:
            raise ValueError(f"{flag}: no aligned verse of {', '.join(missing)} (OSIS book names; the books with "
                             f"pairs: {' '.join(books)})")
    split_of = {**{b: "valid" for b in valid_books}, **{b: "test" for b in test_books}}
    splits = {split: [] for split in SPLITS}
    for pair in pairs:
        splits[split_of.get(pair[0][0], "train")].append(pair)
    if not splits["train"]:
        raise ValueError("--valid-books/--test-books hold out every book: no training pair is left")
    return splits


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def _lengths(lines):
    counts = [len(line.split()) for line in lines]
    return {"total": sum(counts), "mean": round(sum(counts) / len(counts), 2), "max": max(counts)}


def _skipped_stats(skipped):
    out = {}
    for reason, keys in skipped.items():
        if keys:
            out[reason] = {"verses": len(keys), "books": dict(Counter(key[0] for key in keys))}
            if len(keys) <= REFS_LISTED:
                out[reason]["refs"] = [_ref(key) for key in keys]
    return out


def write_corpus(splits, out_dir, langs):
    """out_dir/{split}.{lang} and {split}.ref; {split: {pairs, books, words per side}}."""
    os.makedirs(out_dir, exist_ok=True)
    stats = {}
    for split, pairs in splits.items():
        _write_lines(os.path.join(out_dir, f"{split}.ref"), [_ref(key) for key, _, _ in pairs])
        stats[split] = {"pairs": len(pairs), "books": list(dict.fromkeys(key[0] for key, _, _ in pairs))}
        for side, lang in enumerate(langs, 1):
            lines = [pair[side] for pair in pairs]
            _write_lines(os.path.join(out_dir, f"{split}.{lang}"), lines)
            stats[split][lang] = {"words": _lengths(lines)} if lines else {}
    return stats


def encode_pieces(raw_dir, spm_dir, langs, vocab_size, split_stats):
    """A joint SentencePiece model spm_dir/spm.model learned on the training split only, every split encoded
    into spm_dir/{split}.{lang}, and the pieces per side added to ``split_stats``."""
    os.makedirs(spm_dir, exist_ok=True)
    prefix = os.path.join(spm_dir, "spm")
    sentencepiece_model.train([os.path.join(raw_dir, f"train.{lang}") for lang in langs], prefix, vocab_size)
    encode = sentencepiece_model.encoder(prefix + ".model")
    for split in SPLITS:
        for lang in langs:
            with open(os.path.join(raw_dir, f"{split}.{lang}"), encoding="utf-8") as f:
                pieces = [encode(line.rstrip("\n")) for line in f]
            _write_lines(os.path.join(spm_dir, f"{split}.{lang}"), pieces)
            if pieces:
                split_stats[split][lang]["pieces"] = _lengths(pieces)


def read_plain(module):
    """[(key, plain text)] of a module, in its canonical order."""
    return [(key, sword_text.plain_text(raw, module.source_type)) for key, raw in sword_text.verses(module)]


def build(source, target, out_dir, valid_books=VALID_BOOKS, test_books=TEST_BOOKS, spm_vocab=None, spm_dir=None):
    """Writes the corpus of two opened modules (:func:`sword_text.open_module`) to ``out_dir``; returns
    the stats.json content."""
    langs = (source.lang or "src", target.lang or "tgt")
    if langs[0] == langs[1]:
        langs = (langs[0] + "1", langs[1] + "2")
    pairs, skipped = align(read_plain(source), read_plain(target))
    if not pairs:
        raise ValueError(f"modules {source.name} and {target.name} have no verse key with text on both sides")
    pairs, dropped, length_model = check_lengths(pairs)
    skipped.update(dropped)
    splits = split_books(pairs, valid_books, test_books)
    split_stats = write_corpus(splits, out_dir, langs)
    if spm_vocab:
        encode_pieces(out_dir, spm_dir or os.path.join(out_dir, "spm"), langs, spm_vocab, split_stats)
    return {"dataset": f"bible_{langs[0]}_{langs[1]}", "source_lang": langs[0], "target_lang": langs[1],
            "source": source.describe(), "target": target.describe(),
            "order": "canonical order of the source's versification; consecutive lines are consecutive verses "
                     "where {split}.ref shows no gap",
            "pairs": {split: len(pairs) for split, pairs in splits.items()},
            "splits": split_stats, "skipped": _skipped_stats(skipped), "length_check": length_model,
            **({"sentencepiece": {"vocab_size": spm_vocab, "learned_on": "train", "joint": True}}
               if spm_vocab else {})}


def _books(text):
    return tuple(b for b in (part.strip() for part in text.split(",")) if b)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", required=True, help="where {train,valid,test}.{SRC,TGT,ref} go")
    parser.add_argument("--stats", help="stats.json path (default: OUT_DIR/stats.json)")
    parser.add_argument("--sword-path", action="append", default=[],
                        help="a folder holding mods.d/ or a module .zip, searched before $SWORD_PATH, ~/.sword "
                             "and /usr/share/sword (repeatable)")
    parser.add_argument("--source-module", default=SOURCE_MODULE)
    parser.add_argument("--target-module", default=TARGET_MODULE)
    parser.add_argument("--valid-books", type=_books, default=VALID_BOOKS,
                        help=f"OSIS book names held out as valid (default: {','.join(VALID_BOOKS)})")
    parser.add_argument("--test-books", type=_books, default=TEST_BOOKS,
                        help=f"OSIS book names held out as test (default: {','.join(TEST_BOOKS)})")
    parser.add_argument("--spm-vocab", type=int, help="also learn a joint SentencePiece model of this size on train")
    parser.add_argument("--spm-dir", help="where the SentencePiece model and pieces go (default: OUT_DIR/spm)")
    args = parser.parse_args(argv)
    try:
        source = sword_text.open_module(args.source_module, args.sword_path)
        target = sword_text.open_module(args.target_module, args.sword_path)
        stats = build(source, target, args.out_dir, args.valid_books, args.test_books, args.spm_vocab, args.spm_dir)
    except (ImportError, FileNotFoundError, ValueError) as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    path = args.stats or os.path.join(args.out_dir, "stats.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(json.dumps({"pairs": stats["pairs"], "stats": path}))


if __name__ == "__main__":
    main()
