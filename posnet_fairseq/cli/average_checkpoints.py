"""``posnet-average-checkpoints``: average the parameters of several fairseq checkpoints.

The selection rules and the averaging: :mod:`posnet_fairseq.checkpoint_averaging`.
"""
import argparse
import os
import sys

from ..checkpoint_averaging import select_checkpoints, write_average
from . import in_place, interruption

TOOL = "posnet-average-checkpoints"


def main(argv=None):
    interruption.run(TOOL, lambda: _main(argv))


def _main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", nargs="+", required=True, help="checkpoint files, or one directory with a rule")
    parser.add_argument("--output", required=True)
    rule = parser.add_mutually_exclusive_group()
    rule.add_argument("--num-update-checkpoints", type=int, help="the last N checkpoint_E_U.pt files")
    rule.add_argument("--num-epoch-checkpoints", type=int, help="the last N checkpointE.pt files")
    rule.add_argument("--num-best-checkpoints", type=int, help="the N with the lowest recorded validation loss")
    rule.add_argument("--best-and-following", type=int, metavar="N",
                      help="checkpoint_best.pt and the N-1 update checkpoints after it, else the last N")
    parser.add_argument("--checkpoint-upper-bound", type=int, help="ignore epochs/updates above this number")
    in_place.add_flag(parser)
    args = parser.parse_args(argv)

    import posnet_fairseq  # noqa: F401  (allow-lists fairseq's checkpoint classes for the safe loader)

    rules = (args.num_update_checkpoints, args.num_epoch_checkpoints, args.num_best_checkpoints,
             args.best_and_following)
    if any(r is not None and r < 1 for r in rules):
        parser.error("the number of checkpoints to average must be at least 1")
    if any(rules):
        if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
            parser.error("a selection rule needs exactly one directory in --inputs")
        try:
            paths = select_checkpoints(args.inputs[0], *rules[:3], upper_bound=args.checkpoint_upper_bound,
                                       best_and_following_count=args.best_and_following)
        except ValueError as err:
            parser.error(str(err))
    else:
        paths = args.inputs
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            parser.error(f"--inputs: no such checkpoint file(s): {', '.join(missing)}")
    in_place.refuse_overwrite(parser, paths, [args.output], args.in_place)
    try:
        write_average(paths, args.output)
    except (ValueError, OSError) as err:  # other models, other dictionaries, no checkpoint, a full disk
        sys.exit(f"{TOOL}: {err}")
    print(f"averaged {len(paths)} checkpoints -> {args.output}", file=sys.stderr)
    for p in paths:
        print(f"  {p}", file=sys.stderr)


if __name__ == "__main__":
    main()
