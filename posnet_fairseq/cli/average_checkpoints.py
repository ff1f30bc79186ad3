"""``posnet-average-checkpoints``: average the parameters of several fairseq checkpoints.

Takes explicit files, or a directory plus a selection rule (the last N
update- or epoch-checkpoints, optionally below an upper bound, or the N best
by the validation loss recorded in each checkpoint). The output keeps the
first input's config, so it loads wherever that checkpoint loads. Loading uses
torch's safe loader with fairseq's classes allow-listed (posnet_fairseq.compat).
"""
import argparse
import collections
import os
import re
import sys

import torch


def _numbered(directory, pattern):
    found = []
    for name in os.listdir(directory):
        m = re.fullmatch(pattern, name)
        if m:
            found.append((int(m.group(1)), os.path.join(directory, name)))
    return sorted(found)


def select_checkpoints(directory, num_update=None, num_epoch=None, num_best=None, upper_bound=None):
    """Paths chosen by one rule; raises ValueError naming the flag when there are too few."""
    if num_update:
        flag, count, found = "--num-update-checkpoints", num_update, _numbered(directory, r"checkpoint_\d+_(\d+)\.pt")
    elif num_epoch:
        flag, count, found = "--num-epoch-checkpoints", num_epoch, _numbered(directory, r"checkpoint(\d+)\.pt")
    else:
        flag, count = "--num-best-checkpoints", num_best
        found = []
        for _, path in _numbered(directory, r"checkpoint(\d+)\.pt") + _numbered(directory, r"checkpoint_\d+_(\d+)\.pt"):
            state = torch.load(path, map_location="cpu", weights_only=True)
            loss = state.get("extra_state", {}).get("val_loss")
            if loss is not None:
                found.append((loss, path))
        found.sort()
        return [p for _, p in found[:count]] if len(found) >= count else _too_few(flag, count, len(found), directory)
    if upper_bound is not None:
        found = [(n, p) for n, p in found if n <= upper_bound]
    if len(found) < count:
        return _too_few(flag, count, len(found), directory)
    return [p for _, p in found[-count:]]


def _too_few(flag, wanted, have, directory):
    raise ValueError(f"{flag} {wanted}: only {have} matching checkpoints in {directory}")


def average_checkpoints(paths):
    """The first checkpoint's state with each model tensor replaced by the mean over ``paths``."""
    sums, first = collections.OrderedDict(), None
    for path in paths:
        state = torch.load(path, map_location="cpu", weights_only=True)
        if first is None:
            first = state
        params = state["model"]
        if set(params) != set(first["model"]):
            raise ValueError(f"{path} has different parameters than {paths[0]}: not the same model")
        for key, tensor in params.items():
            value = tensor.double() if tensor.is_floating_point() else tensor
            sums[key] = sums[key] + value if key in sums and tensor.is_floating_point() else value
    for key, tensor in first["model"].items():
        if tensor.is_floating_point():
            first["model"][key] = (sums[key] / len(paths)).to(tensor.dtype)
    first["optimizer_history"] = first.get("optimizer_history", [])[-1:]
    first["last_optimizer_state"] = None
    return first


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", nargs="+", required=True, help="checkpoint files, or one directory with a rule")
    parser.add_argument("--output", required=True)
    rule = parser.add_mutually_exclusive_group()
    rule.add_argument("--num-update-checkpoints", type=int, help="the last N checkpoint_E_U.pt files")
    rule.add_argument("--num-epoch-checkpoints", type=int, help="the last N checkpointE.pt files")
    rule.add_argument("--num-best-checkpoints", type=int, help="the N with the lowest recorded validation loss")
    parser.add_argument("--checkpoint-upper-bound", type=int, help="ignore epochs/updates above this number")
    args = parser.parse_args(argv)

    import posnet_fairseq  # noqa: F401  (allow-lists fairseq's checkpoint classes for the safe loader)

    rules = (args.num_update_checkpoints, args.num_epoch_checkpoints, args.num_best_checkpoints)
    if any(r is not None and r < 1 for r in rules):
        parser.error("the number of checkpoints to average must be at least 1")
    if any(rules):
        if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
            parser.error("--num-*-checkpoints needs exactly one directory in --inputs")
        try:
            paths = select_checkpoints(args.inputs[0], *rules, upper_bound=args.checkpoint_upper_bound)
        except ValueError as err:
            parser.error(str(err))
    else:
        paths = args.inputs
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            parser.error(f"--inputs: no such checkpoint file(s): {', '.join(missing)}")
    averaged = average_checkpoints(paths)
    tmp = args.output + ".tmp"
    torch.save(averaged, tmp)
    os.replace(tmp, args.output)  # never leave a half-written checkpoint behind
    print(f"averaged {len(paths)} checkpoints -> {args.output}", file=sys.stderr)
    for p in paths:
        print(f"  {p}", file=sys.stderr)


if __name__ == "__main__":
    main()
