"""``posnet-quantize CHECKPOINT OUTPUT``: the model with int8 linear layers, for decoding on CPU.

Writes a checkpoint whose linear layers are int8 (torch's dynamic
quantisation, ``posnet_fairseq/models/int8.py``), the output projection too
unless ``--fp32-output``, and prints the largest logit difference to the fp32
model on random batches. The output decodes with fairseq's own tools:
``fairseq-generate DATA --user-dir posnet_fairseq --path OUTPUT --cpu``
(int8 kernels run on CPU only). It is written whole or not at all.
"""
import copy
import sys

from . import checkpoint_tool, interruption

TOOL = "posnet-quantize"


def main(argv=None):
    interruption.run(TOOL, lambda: _main(argv))


def _main(argv):
    parser = checkpoint_tool.parser(__doc__, "where to write the int8 checkpoint")
    parser.add_argument("--fp32-output", action="store_true",
                        help="keep the output projection (the vocabulary softmax's weights) in fp32")
    args = checkpoint_tool.parse_args(parser, argv)

    import posnet_fairseq  # noqa: F401  (registers the model and mixers)

    from .. import precompute
    from ..models import int8

    state, task, model = checkpoint_tool.load_trained(TOOL, args.checkpoint, args.data)
    original = copy.deepcopy(model)
    mode = "fp32-output" if args.fp32_output else "all"
    try:
        state = int8.quantized_checkpoint(state, model, mode)
    except ValueError as err:
        sys.exit(f"{TOOL}: {args.checkpoint}: {err}")
    checkpoint_tool.save(TOOL, state, args.output)

    # What fairseq will load: the written checkpoint, rebuilt from its arguments.
    _, _, reloaded = precompute.load_checkpoint_model(args.output, args.data)
    difference = precompute.output_difference(original, reloaded, task.target_dictionary, 32)
    print(f"int8 linear layers ({mode}) -> {args.output}")
    print(f"max |logit difference| to the fp32 checkpoint on random batches: {difference:.3g}")


if __name__ == "__main__":
    main()
