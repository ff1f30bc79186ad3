"""``posnet-precompute CHECKPOINT OUTPUT``: folds PosNet energies into tables (PosNet paper, section 4).

Writes a checkpoint whose aPosNet/rPosNet mixers hold only their energy
tables (see ``posnet_fairseq/precompute.py``), prints the parameter counts
before and after and the largest logit difference between the two models on
random batches, and optionally exports every table as ``.npy``. The output
loads like any checkpoint: ``fairseq-generate DATA --user-dir posnet_fairseq
--path OUTPUT``. It is written whole or not at all (a full disk or an
interruption leaves no ``.tmp`` file).
"""
import copy

from ..precompute import DEFAULT_LENGTH
from . import checkpoint_tool, interruption

TOOL = "posnet-precompute"


def main(argv=None):
    interruption.run(TOOL, lambda: _main(argv))


def _main(argv):
    parser = checkpoint_tool.parser(__doc__, "where to write the precomputed checkpoint")
    parser.add_argument("--max-length", type=int, default=DEFAULT_LENGTH, metavar="N",
                        help=f"positions covered by the tables; longer inputs are refused (default {DEFAULT_LENGTH})")
    parser.add_argument("--export-npy", metavar="DIR", help="also write every table as DIR/<module>.<table>.npy")
    args = checkpoint_tool.parse_args(parser, argv)

    import posnet_fairseq  # noqa: F401  (registers the model and mixers)

    from .. import precompute

    state, task, model = checkpoint_tool.load_trained(TOOL, args.checkpoint, args.data)
    before = precompute.parameter_counts(model)
    original = copy.deepcopy(model)
    try:
        mixers = precompute.precompute_model_(model, args.max_length)
    except ValueError as err:
        parser.error(str(err))
    state["model"] = precompute.capped_state_dict(model, state["cfg"].model, args.max_length)
    checkpoint_tool.save(TOOL, state, args.output)

    # What fairseq will load: the written checkpoint, rebuilt from its arguments.
    _, _, reloaded = precompute.load_checkpoint_model(args.output, args.data)
    after = precompute.parameter_counts(reloaded)
    difference = precompute.output_difference(original, reloaded, task.target_dictionary,
                                              min(args.max_length, 32))
    print(f"precomputed {len(mixers)} PosNet mixers for N = {args.max_length} positions -> {args.output}")
    print(f"{'parameters':<12}{'before':>14}{'after':>14}{'change':>9}")
    for key in ("attention", "model"):
        change = 100.0 * (after[key] - before[key]) / before[key]
        print(f"{key:<12}{before[key]:>14,}{after[key]:>14,}{change:>+8.1f}%")
    print(f"max |logit difference| between the checkpoints on random batches: {difference:.3g}")
    if args.export_npy:
        index = precompute.export_npy(model, args.export_npy)
        print(f"exported {len(index)} tables to {args.export_npy} (index.json describes them)")


if __name__ == "__main__":
    main()
