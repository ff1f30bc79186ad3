"""``posnet-spm``: learn and apply a SentencePiece model from the shell.

The pip ``sentencepiece`` package ships no ``spm_train``/``spm_encode``
binaries; recipes call this instead::

    posnet-spm train --input train.src train.tgt --model-prefix spm --vocab-size 8000
    posnet-spm encode --model spm.model < train.src > train.spm.src
"""
import argparse
import os
import sys

from ..data import sentencepiece_model
from . import in_place

SPM_FILES = ("model", "vocab")  # what SentencePiece writes: PREFIX.model, PREFIX.vocab


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="learn a model from text files")
    train.add_argument("--input", nargs="+", required=True)
    train.add_argument("--model-prefix", required=True)
    train.add_argument("--vocab-size", type=int, required=True)
    train.add_argument("--model-type", default="bpe", choices=["bpe", "unigram", "char", "word"])
    train.add_argument("--character-coverage", type=float, default=1.0)
    in_place.add_flag(train)
    encode = sub.add_parser("encode", help="segment stdin line by line into pieces")
    encode.add_argument("--model", required=True)
    args = parser.parse_args(argv)

    if args.command == "train":
        outputs = [f"{args.model_prefix}.{ext}" for ext in SPM_FILES]
        in_place.refuse_overwrite(train, args.input, outputs, args.in_place)
        try:
            # SentencePiece reads the inputs before it writes: a model written as PREFIX.tmp, then renamed,
            # replaces an input (--in-place) whole or not at all.
            sentencepiece_model.train(args.input, args.model_prefix + ".tmp", args.vocab_size, args.model_type,
                                      args.character_coverage)
        except ValueError as err:
            parser.error(str(err))
        for ext, output in zip(SPM_FILES, outputs):
            os.replace(f"{args.model_prefix}.tmp.{ext}", output)
    else:
        encode_line = sentencepiece_model.encoder(args.model)
        for line in sys.stdin:
            print(encode_line(line.rstrip("\n")))


if __name__ == "__main__":
    main()
