"""Errors users of fairseq's tools meet with this plugin, said directly with the fix (docs/troubleshooting.md).

:func:`check_command_line` refuses, before fairseq starts, command lines that
fairseq would run into a confusing failure; :func:`explain` turns an
exception fairseq raised into one sentence naming the cause and the fixing
flag, or returns None for an error it does not know (re-raised as it is).
"""
import argparse
import re
from typing import Optional, Sequence

PAGE = "docs/troubleshooting.md"
_SIZE = re.compile(r"Size of sample #(\d+) is invalid \(=\((.*?)\)\) since max_positions=\((.*?)\)")


def check_command_line(argv: Sequence[str]) -> Optional[str]:
    """A message for a command line that cannot work, else None."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for switch in ("--bf16", "--memory-efficient-bf16", "--cpu"):
        parser.add_argument(switch, action="store_true")
    parser.add_argument("--distributed-world-size", type=int)
    parser.add_argument("--distributed-init-method")
    parser.add_argument("--ddp-backend")
    given = parser.parse_known_args(argv)[0]
    if given.bf16 or given.memory_efficient_bf16:
        return ("--bf16: fairseq's --bf16 (and --memory-efficient-bf16) switch it to its TPU path (args.tpu = "
                "True), which needs torch_xla and fails on a CPU or GPU with \"'NoneType' object has no attribute "
                "'xla_device'\". Train in fp32, or with --fp16 on a GPU; bf16 is tested at module level "
                f"({PAGE}#fairseqs---bf16-is-its-tpu-path)")
    world = given.distributed_world_size
    if given.cpu and world is not None and world > 1:
        missing = [fix for fix, value in (("--distributed-init-method tcp://localhost:PORT",
                                           given.distributed_init_method),
                                          ("--ddp-backend legacy_ddp", given.ddp_backend)) if value is None]
        if missing:
            return (f"--cpu --distributed-world-size {world}: fairseq counts GPUs for its workers (\"world size is "
                    f"{world} but have 0 available devices\"); CPU data-parallel training also needs "
                    f"{' and '.join(missing)} ({PAGE}#cpu-data-parallel-training)")
    return None


def explain(err: BaseException) -> Optional[str]:
    """One sentence with the cause and the fix of an error fairseq raised, or None."""
    text = str(err)
    if "--share-all-embeddings requires a joined dictionary" in text:
        return ("--share-all-embeddings needs one dictionary for both languages: binarize again with "
                "fairseq-preprocess --joined-dictionary (or --srcdict of the other side), or train without "
                f"--share-all-embeddings ({PAGE}#shared-embeddings-need-a-joined-dictionary)")
    match = _SIZE.search(text)
    if match:
        return (f"sentence #{match.group(1)} has (source, target) lengths ({match.group(2)}) but the model takes at "
                f"most ({match.group(3)}) positions: raise --max-source-positions / --max-target-positions (and a "
                "fixed-length mixer's own limit, e.g. --linearnet-max-length), filter the corpus, or skip such "
                f"sentences with --skip-invalid-size-inputs-valid-test ({PAGE}#size-of-sample-is-invalid)")
    return None
