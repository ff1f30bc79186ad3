"""Which update checkpoints to average: N checkpoints centred on the best-validation-loss one.

    python -m posnet_fairseq.recipe_tools.avgrule --save-dir DIR --count N

prints ``--num-update-checkpoints N --checkpoint-upper-bound U`` for
``posnet-average-checkpoints``: the window of N consecutive interval
checkpoints (``checkpoint_E_U.pt``) around the update of checkpoint_best.pt
(fairseq's best is the lowest validation loss, i.e. the best perplexity),
moved back from the end of training when there are not N/2 later ones.
This is how the PosNet recipes read "average around the best-perplexity
checkpoint"; the AAN+ recipes average the last N instead and do not call it.
"""
import argparse
import os
import re
import sys


def update_checkpoints(save_dir):
    found = []
    for name in os.listdir(save_dir):
        m = re.fullmatch(r"checkpoint_\d+_(\d+)\.pt", name)
        if m:
            found.append(int(m.group(1)))
    return sorted(found)


def best_update(save_dir):
    import torch

    from ..compat import allow_fairseq_checkpoint_classes

    allow_fairseq_checkpoint_classes()
    state = torch.load(os.path.join(save_dir, "checkpoint_best.pt"), map_location="cpu", weights_only=True)
    return int(state["optimizer_history"][-1]["num_updates"])


def window(updates, best, count):
    """The upper bound U such that the last ``count`` of ``updates`` <= U are centred on ``best``."""
    if len(updates) < count:
        raise ValueError(f"--count {count}: only {len(updates)} update checkpoints")
    centre = max(i for i, u in enumerate(updates) if u <= best) if updates[0] <= best else 0
    start = min(max(centre - count // 2, 0), len(updates) - count)
    return updates[start + count - 1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save-dir", required=True)
    parser.add_argument("--count", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        upper = window(update_checkpoints(args.save_dir), best_update(args.save_dir), args.count)
    except (ValueError, FileNotFoundError) as err:
        parser.error(f"{args.save_dir}: {err}")
    print(f"--num-update-checkpoints {args.count} --checkpoint-upper-bound {upper}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
