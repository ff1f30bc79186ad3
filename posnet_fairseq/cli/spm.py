"""``posnet-spm``: learn and apply a SentencePiece model from the shell.

The pip ``sentencepiece`` package ships no ``spm_train``/``spm_encode``
binaries; recipes call this instead::

    posnet-spm train --input train.src train.tgt --model-prefix spm --vocab-size 8000
    posnet-spm encode --model spm.model < train.src > train.spm.src
"""
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="learn a model from text files")
    train.add_argument("--input", nargs="+", required=True)
    train.add_argument("--model-prefix", required=True)
    train.add_argument("--vocab-size", type=int, required=True)
    train.add_argument("--model-type", default="bpe", choices=["bpe", "unigram", "char", "word"])
    train.add_argument("--character-coverage", type=float, default=1.0)
    encode = sub.add_parser("encode", help="segment stdin line by line into pieces")
    encode.add_argument("--model", required=True)
    args = parser.parse_args(argv)

    import sentencepiece as spm

    if args.command == "train":
        if args.vocab_size < 8:
            parser.error(f"--vocab-size {args.vocab_size}: must be at least 8")
        spm.SentencePieceTrainer.train(
            input=",".join(args.input),
            model_prefix=args.model_prefix,
            vocab_size=args.vocab_size,
            model_type=args.model_type,
            character_coverage=args.character_coverage,
            # A small corpus may have fewer pieces than asked for: take what exists.
            hard_vocab_limit=False,
            minloglevel=2,
        )
    else:
        processor = spm.SentencePieceProcessor(model_file=args.model)
        for line in sys.stdin:
            print(" ".join(processor.encode(line.rstrip("\n"), out_type=str)))


if __name__ == "__main__":
    main()
