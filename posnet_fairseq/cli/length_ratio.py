"""``posnet-length-ratio DATA_BIN -s SRC -t TGT``: prints gamma = mean source / mean target length.

The same number the model computes at build time for cross-attention mixers
(see posnet_fairseq.data.length_ratio); pass it as ``--length-ratio`` to pin it.
"""
import argparse


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_bin")
    parser.add_argument("-s", "--source-lang", required=True)
    parser.add_argument("-t", "--target-lang", required=True)
    parser.add_argument("--split", default="train")
    args = parser.parse_args(argv)
    from ..data.length_ratio import length_ratio

    try:
        gamma = length_ratio(args.data_bin, args.source_lang, args.target_lang, args.split)
    except FileNotFoundError as err:
        parser.error(str(err))
    print(f"{gamma:.6f}")


if __name__ == "__main__":
    main()
