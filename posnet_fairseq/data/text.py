"""Raw-text steps of the data recipes, replacing the Moses perl scripts and sed lines of fairseq's prepare-*.sh.

    python -m posnet_fairseq.data.text iwslt-train IN OUT
        drop IWSLT metadata lines (<url>, <talkid>, <keywords>) and strip
        <title>/<description> tags, as prepare-iwslt14.sh does
    python -m posnet_fairseq.data.text segs IN OUT
        the text of every <seg id=...> line of an IWSLT .xml or WMT .sgm file,
        with the right single quote turned into an apostrophe (as fairseq's scripts)
    python -m posnet_fairseq.data.text printing IN OUT
        remove-non-printing-char.perl, then the spaces of every line normalised (one
        between words, none at either end): the Chinese side of WMT18 before segmentation
    python -m posnet_fairseq.data.text tokenize -l LANG [-a] [--replace-unicode-punct] [--normalize]
            [--remove-non-printing] [--lowercase] [--workers N] IN OUT
        sacremoses: replace-unicode-punctuation.perl, normalize-punctuation.perl,
        remove-non-printing-char.perl, tokenizer.perl [-a] (escaping on, as tokenizer.perl),
        lowercase.perl, in that order
    python -m posnet_fairseq.data.text romanian [--remove-diacritics] IN OUT
        Romanian s and t with cedilla written with comma below (the WMT16 scripts'
        normalise-romanian.py); --remove-diacritics then writes every Romanian letter
        without its diacritic (their remove-diacritics.py), as Sennrich et al. (2016)
        prepared WMT16 En-Ro and the hard-coded Gaussian paper after them
    python -m posnet_fairseq.data.text holdout --every N CORPUS L1 L2 TRAIN VALID
        every N-th pair (1-based line numbers divisible by N) to VALID, the rest to TRAIN
    python -m posnet_fairseq.data.text long-pair --min-tokens N PREFIX L1 L2
        append one pair longer than N tokens on both sides, made by joining the
        corpus's own pairs in order (the recipes' --micro fixture: a valid
        sentence over the models' --max-*-positions)
"""
import argparse
import functools
import multiprocessing
import re
import sys
import unicodedata

_IWSLT_DROP = ("<url>", "<talkid>", "<keywords>")
_IWSLT_STRIP = re.compile(r"</?(title|description)>")
_SEG = re.compile(r'<seg id="?\d+"?>\s*(.*?)\s*</seg>\s*$')
# Every text input is read as UTF-8 with its byte-order mark (U+FEFF, which Windows editors write) dropped:
# kept, it would be the first sentence's first character, e.g. a reference no translation matches.
ENCODING = "utf-8-sig"


def read_lines(path, what="input"):
    """The lines of a UTF-8 text file, newlines and a byte-order mark stripped. A byte sequence that is not
    UTF-8 raises ValueError naming ``what`` (e.g. the flag), the file, the line and the byte, not the codec's
    offset."""
    lines = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                lines.append(raw.decode(ENCODING if number == 1 else "utf-8").rstrip("\r\n"))
            except UnicodeDecodeError as err:
                raise ValueError(f"{what}: {path} line {number} is not UTF-8 (byte {raw[err.start:err.start + 1]!r} "
                                 f"at character {len(raw[:err.start].decode('utf-8', 'replace')) + 1}); convert the "
                                 f"file, e.g. iconv -f latin1 -t utf-8") from None
    return lines


def iwslt_train_lines(lines):
    for line in lines:
        if any(tag in line for tag in _IWSLT_DROP):
            continue
        yield _IWSLT_STRIP.sub("", line.rstrip("\n"))


def seg_lines(lines):
    for line in lines:
        if "<seg id" not in line:
            continue
        m = _SEG.search(line.rstrip("\n"))
        if m is None:
            raise ValueError(f"malformed <seg> line: {line.strip()[:120]!r}")
        yield m.group(1).replace("\u2019", "'")


# The two spellings of s and t in Romanian text: cedilla (U+015E/F, U+0162/3) -> comma below (U+0218/9, U+021A/B).
_COMMA_BELOW = str.maketrans("\u015e\u015f\u0162\u0163", "\u0218\u0219\u021a\u021b")
# The Romanian letters with diacritics (s, t with comma below, a with breve, a, i with circumflex) -> the base letter.
_NO_DIACRITICS = str.maketrans("\u0218\u0219\u021a\u021b\u0102\u0103\u00c2\u00e2\u00ce\u00ee", "SsTtAaAaIi")


def romanian_line(line, remove_diacritics=False):
    """One spelling of the Romanian letters; without diacritics when ``remove_diacritics`` (the cedilla forms
    first become comma below, so both spellings lose their mark)."""
    line = line.translate(_COMMA_BELOW)
    return line.translate(_NO_DIACRITICS) if remove_diacritics else line


def remove_non_printing(line):
    """Control, format, unassigned and private-use characters become spaces (remove-non-printing-char.perl)."""
    return "".join(" " if unicodedata.category(c).startswith("C") else c for c in line)


@functools.lru_cache(maxsize=None)
def _moses(lang):
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    return MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)


def tokenize_line(line, lang, aggressive=False, normalize=False, non_printing=False, lowercase=False,
                  replace_unicode=False):
    normalizer, tokenizer = _moses(lang)
    line = line.rstrip("\n")
    if replace_unicode:  # full-width and CJK punctuation -> ASCII, before normalize-punctuation.perl
        line = normalizer.replace_unicode_punct(line)
    if normalize:
        line = normalizer.normalize(line)
    if non_printing:
        line = remove_non_printing(line)
    line = tokenizer.tokenize(line, aggressive_dash_splits=aggressive, return_str=True, escape=True)
    return line.lower() if lowercase else line


def _tokenize_chunk(chunk, **kwargs):
    return [tokenize_line(line, **kwargs) for line in chunk]


def _chunks(lines, size=2000):
    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def tokenize_file(src, dst, workers=1, **kwargs):
    work = functools.partial(_tokenize_chunk, **kwargs)
    with open(src, encoding=ENCODING) as fin, open(dst, "w", encoding="utf-8") as fout:
        if workers <= 1:
            results = map(work, _chunks(fin))
            for chunk in results:
                fout.writelines(line + "\n" for line in chunk)
        else:
            with multiprocessing.Pool(workers) as pool:
                for chunk in pool.imap(work, _chunks(fin)):
                    fout.writelines(line + "\n" for line in chunk)


def holdout(corpus, l1, l2, train, valid, every):
    """Pair n (1-based) goes to ``valid`` when n % every == 0 (fairseq's awk NR%N==0); returns (train, valid) counts."""
    counts = [0, 0]
    outs = {(name, lang): open(f"{prefix}.{lang}", "w", encoding="utf-8")
            for name, prefix in (("train", train), ("valid", valid)) for lang in (l1, l2)}
    try:
        with open(f"{corpus}.{l1}", encoding=ENCODING) as f1, open(f"{corpus}.{l2}", encoding=ENCODING) as f2:
            for n, (a, b) in enumerate(zip(f1, f2, strict=True), start=1):
                name = "valid" if n % every == 0 else "train"
                counts[name == "valid"] += 1
                outs[name, l1].write(a)
                outs[name, l2].write(b)
    finally:
        for f in outs.values():
            f.close()
    return tuple(counts)


def append_long_pair(prefix, l1, l2, min_tokens):
    """Appends to PREFIX.{l1,l2} the concatenation of its first pairs, enough that both sides exceed ``min_tokens``."""
    sides = []
    for lang in (l1, l2):
        with open(f"{prefix}.{lang}", encoding=ENCODING) as f:
            sides.append([line.split() for line in f])
    if len(sides[0]) != len(sides[1]) or not sides[0]:
        raise ValueError(f"{prefix}.{l1}/{l2}: {len(sides[0])} and {len(sides[1])} lines, need an equal, non-zero number")
    joined = [[], []]
    for n in range(len(sides[0]) * (min_tokens + 1)):  # pairs repeat when the corpus is shorter than min_tokens
        if min(len(joined[0]), len(joined[1])) > min_tokens:
            break
        for side, lines in zip(joined, sides):
            side.extend(lines[n % len(lines)])
    if min(len(joined[0]), len(joined[1])) <= min_tokens:
        raise ValueError(f"{prefix}.{l1}/{l2}: the lines are empty, no pair over {min_tokens} tokens can be made")
    for lang, words in zip((l1, l2), joined):
        with open(f"{prefix}.{lang}", "a", encoding="utf-8") as f:
            f.write(" ".join(words) + "\n")
    return tuple(len(j) for j in joined)


def _map_file(fn, src, dst):
    with open(src, encoding=ENCODING, errors="replace") as fin, open(dst, "w", encoding="utf-8") as fout:
        for line in fn(fin):
            fout.write(line + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("iwslt-train", "segs", "printing"):
        p = sub.add_parser(name)
        p.add_argument("input")
        p.add_argument("output")
    ro = sub.add_parser("romanian")
    ro.add_argument("--remove-diacritics", action="store_true", help="then write the letters without diacritics")
    ro.add_argument("input")
    ro.add_argument("output")
    tok = sub.add_parser("tokenize")
    tok.add_argument("-l", "--lang", required=True)
    tok.add_argument("-a", "--aggressive", action="store_true", help="split hyphens (@-@), tokenizer.perl -a")
    tok.add_argument("--replace-unicode-punct", action="store_true", help="replace-unicode-punctuation.perl first")
    tok.add_argument("--normalize", action="store_true", help="normalize-punctuation.perl first")
    tok.add_argument("--remove-non-printing", action="store_true")
    tok.add_argument("--lowercase", action="store_true")
    tok.add_argument("--workers", type=int, default=1)
    tok.add_argument("input")
    tok.add_argument("output")
    hold = sub.add_parser("holdout")
    hold.add_argument("--every", type=int, required=True)
    for name in ("corpus", "l1", "l2", "train", "valid"):
        hold.add_argument(name)
    long = sub.add_parser("long-pair")
    long.add_argument("--min-tokens", type=int, required=True)
    for name in ("prefix", "l1", "l2"):
        long.add_argument(name)
    args = parser.parse_args(argv)

    if args.command == "iwslt-train":
        _map_file(iwslt_train_lines, args.input, args.output)
    elif args.command == "segs":
        _map_file(seg_lines, args.input, args.output)
    elif args.command == "printing":  # the non-printing characters removed, then the spaces normalised
        _map_file(lambda lines: (" ".join(remove_non_printing(l).split()) for l in lines), args.input, args.output)
    elif args.command == "romanian":
        _map_file(lambda lines: (romanian_line(l.rstrip("\n"), args.remove_diacritics) for l in lines),
                  args.input, args.output)
    elif args.command == "tokenize":
        tokenize_file(args.input, args.output, workers=args.workers, lang=args.lang, aggressive=args.aggressive,
                      normalize=args.normalize, non_printing=args.remove_non_printing, lowercase=args.lowercase,
                      replace_unicode=args.replace_unicode_punct)
    elif args.command == "holdout":
        if args.every < 2:
            parser.error(f"--every {args.every}: must be at least 2")
        n_train, n_valid = holdout(args.corpus, args.l1, args.l2, args.train, args.valid, args.every)
        print(f"holdout: {n_train} train, {n_valid} valid pairs", file=sys.stderr)
    elif args.command == "long-pair":
        try:
            lengths = append_long_pair(args.prefix, args.l1, args.l2, args.min_tokens)
        except (ValueError, FileNotFoundError) as err:
            parser.error(str(err))
        print(f"long-pair: appended a pair of {lengths[0]} / {lengths[1]} tokens to {args.prefix}", file=sys.stderr)


if __name__ == "__main__":
    main()
