"""Errors users of fairseq's tools meet with this plugin, said directly with the fix (docs/troubleshooting.md).

:func:`check_command_line` refuses, before fairseq starts, command lines that
fairseq would run into a confusing failure; :func:`explain` turns an
exception fairseq raised into one sentence naming the cause and the fixing
flag, or returns None for an error it does not know (re-raised as it is).
"""
import re
from typing import Optional, Sequence

PAGE = "docs/troubleshooting.md"
_SIZE = re.compile(r"Size of sample #(\d+) is invalid \(=\((.*?)\)\) since max_positions=\((.*?)\)")


def _value(argv, flag):
    for i, a in enumerate(argv):
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
    return None


def check_command_line(argv: Sequence[str]) -> Optional[str]:
    """A message for a command line that cannot work, else None."""
    if "--bf16" in argv or "--memory-efficient-bf16" in argv:
        return ("--bf16: fairseq's --bf16 (and --memory-efficient-bf16) switch it to its TPU path (args.tpu = "
                "True), which needs torch_xla and fails on a CPU or GPU with \"'NoneType' object has no attribute "
                "'xla_device'\". Train in fp32, or with --fp16 on a GPU; bf16 is tested at module level "
                f"({PAGE}#fairseqs---bf16-is-its-tpu-path)")
    world = _value(argv, "--distributed-world-size")
    if "--cpu" in argv and world is not None and world.isdigit() and int(world) > 1:
        missing = [flag for flag, needed in (("--distributed-init-method tcp://localhost:PORT", "--distributed-init-method"),
                                             ("--ddp-backend legacy_ddp", "--ddp-backend")) if needed not in argv]
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
                f"--share-all-embeddings ({PAGE}#share-all-embeddings-requires-a-joined-dictionary)")
    match = _SIZE.search(text)
    if match:
        return (f"sentence #{match.group(1)} has (source, target) lengths ({match.group(2)}) but the model takes at "
                f"most ({match.group(3)}) positions: raise --max-source-positions / --max-target-positions (and a "
                "fixed-length mixer's own limit, e.g. --linearnet-max-length), filter the corpus, or skip such "
                f"sentences with --skip-invalid-size-inputs-valid-test ({PAGE}#size-of-sample-is-invalid)")
    if "Unsupported global" in text and "argparse.Namespace" in text:
        return ("the checkpoint names this plugin's classes but the plugin was not imported: pass --user-dir "
                f"to fairseq's tools, or use the posnet-* wrappers ({PAGE}#unsupported-global-argparsenamespace)")
    return None
