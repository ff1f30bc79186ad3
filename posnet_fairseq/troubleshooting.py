"""Errors users of fairseq's tools meet with this plugin, said directly with the fix (docs/troubleshooting.md).

:func:`check_command_line` refuses, before fairseq starts, command lines that
fairseq would run into a confusing failure; :func:`explain` turns an
exception fairseq raised into one sentence naming the cause and the fixing
flag, or returns None for an error it does not know (re-raised as it is);
:func:`flag_error` recognises the plugin's own refusal of a model flag (a
ValueError that starts with the flag), which the wrappers print alone, as
argparse prints a bad flag.
"""
import argparse
import ast
import os
import re
from typing import Optional, Sequence

PAGE = "docs/troubleshooting.md"
_SIZE = re.compile(r"Size of sample #(\d+) is invalid \(=\((.*?)\)\) since max_positions=\((.*?)\)")
_NUMPY_SCALAR = re.compile(r"np\.\w+\(([^()]*)\)")  # numpy >= 2 writes np.int32(7) for 7
_FLAG_ERROR = re.compile(r"--[a-z][a-z0-9-]*[ :]")
_CANNOT_LOAD = re.compile(r"Cannot load model parameters from checkpoint (.*?); please ensure")
_EMBEDDINGS = re.compile(r"size mismatch for \S*embed_tokens\.weight: copying a param with shape "
                         r"torch\.Size\(\[(\d+), \d+\]\) from checkpoint, the shape in current model is "
                         r"torch\.Size\(\[(\d+), ")
TRAINING_TOOLS = ("train",)  # the wrappers that build a model from flags; the others load --path


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


def flag_error(err: BaseException) -> Optional[str]:
    """The message of the plugin's refusal of a model flag (``--encoder-self-mixer foo: unknown mixer; ...``,
    a value out of range, per-layer specs of the wrong length, a mixer at a site it cannot serve), else None."""
    text = str(err)
    return text if isinstance(err, ValueError) and _FLAG_ERROR.match(text) else None


def _chain(err: BaseException):
    """``err`` and the exceptions it was raised from or while handling (fairseq wraps load errors)."""
    seen = []
    while err is not None and err not in seen:
        seen.append(err)
        err = err.__cause__ or err.__context__
    return seen


def option(argv: Sequence[str], flag: str, default: Optional[str] = None) -> Optional[str]:
    """``flag``'s value in ``argv`` (written ``flag VALUE`` or ``flag=VALUE``; the last one given), else ``default``."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument(flag, default=default)
    return getattr(parser.parse_known_args(list(argv))[0], flag.lstrip("-").replace("-", "_"))


def _stored_data(checkpoint: str) -> str:
    """' (it was trained on DIR)' from the checkpoint's config, or '' when it cannot be read."""
    from .checkpoint_files import CheckpointFileError, load

    try:
        cfg = load(checkpoint, mmap=True).get("cfg") or {}
        data = (cfg.get("task") or {}).get("data")
    except (CheckpointFileError, AttributeError, TypeError):
        return ""
    return f" (it was trained on {data})" if data else ""


def _other_checkpoint(err: BaseException, tool: str, argv: Sequence[str]) -> Optional[str]:
    """A checkpoint that does not fit: another data-bin's dictionary, or another model."""
    texts = [str(e) for e in _chain(err)]
    cannot = next((m.group(1) for m in map(_CANNOT_LOAD.search, texts) if m), None)
    checkpoint = cannot or (option(argv, "--path") or "").split(":")[0]
    sizes = next((m.groups() for m in map(_EMBEDDINGS.search, texts) if m), None)
    if sizes is not None and sizes[0] != sizes[1]:
        fix = ("train into a new --save-dir, or on the checkpoint's data-bin" if tool in TRAINING_TOOLS
               else "give the data-bin it was trained on")
        return (f"{checkpoint} was trained with a dictionary of {sizes[0]} entries but the data-bin's has "
                f"{sizes[1]}: another data-bin{_stored_data(checkpoint)}; {fix} "
                f"({PAGE}#a-checkpoint-of-another-data-bin-or-model)")
    if cannot is not None:
        detail = next((line.strip() for t in texts for line in t.splitlines()
                       if line.strip().startswith(("size mismatch", "Missing key", "Unexpected key"))), "")
        return (f"{checkpoint} holds another model than --arch and the model flags given build "
                f"({detail[:160]}): train into a new --save-dir, or give the checkpoint's own architecture and flags "
                f"({PAGE}#a-checkpoint-of-another-data-bin-or-model)")
    return None


def no_space(err: BaseException, argv: Sequence[str]) -> Optional[str]:
    """'no space left on DIR' for a full disk while fairseq writes (a checkpoint into --save-dir), else None."""
    from .atomic_files import is_disk_full

    if not is_disk_full(err):
        return None
    directory = os.path.dirname(os.path.abspath(err.filename)) if getattr(err, "filename", None) else \
        os.path.abspath(option(argv, "--save-dir", "checkpoints"))
    return (f"no space left on {directory}: free space there or give another --save-dir; the same command then "
            f"resumes from the last checkpoint ({PAGE}#no-space-left)")


def model_overrides(text: Optional[str]) -> dict:
    """The {setting: value} of a --model-overrides text ({} when absent or not a literal: fairseq says why)."""
    try:
        overrides = ast.literal_eval(text) if text else {}
    except (ValueError, SyntaxError):
        return {}
    return overrides if isinstance(overrides, dict) else {}


def architecture_override(overrides_text: Optional[str], keys: Optional[Sequence[str]] = None) -> Optional[str]:
    """The message for a --model-overrides of an evaluation tool that changes what the model is: one naming a
    site's mixer (``keys``: the settings to name instead, when the checkpoint's parameters did not load), else
    None. fairseq applies overrides to the checkpoint's settings before it builds the model, then loads the
    trained parameters into it: a decoding setting (a RoPE scaling) fits, another mixer does not."""
    from .sites import SITE_LIST, dest

    overrides = model_overrides(overrides_text)
    mixers = {dest(site.mixer_flag) for site in SITE_LIST} | {"arch"}
    named = list(keys) if keys is not None else [key for key in overrides if key in mixers]
    if not named:
        return None
    return (f"--model-overrides changes how a model decodes, not what it is ({', '.join(map(str, named))}): "
            f"retrain with the new flag ({PAGE}#model-overrides-that-change-what-a-model-is)")


def _overridden_parameters(err: BaseException, tool: str, argv: Sequence[str]) -> Optional[str]:
    """An evaluation tool's checkpoint whose parameters do not fit the model its --model-overrides build."""
    overrides = model_overrides(option(argv, "--model-overrides"))
    if tool in TRAINING_TOOLS or not overrides:
        return None
    if any(str(e).startswith("Error(s) in loading state_dict") for e in _chain(err)):
        return architecture_override(None, sorted(overrides))
    return None


def explain(err: BaseException, tool: str = "train", argv: Sequence[str] = ()) -> Optional[str]:
    """One sentence with the cause and the fix of an error fairseq raised in ``posnet-TOOL ARGV``, or None."""
    text = str(err)
    if "--share-all-embeddings requires a joined dictionary" in text:
        return ("--share-all-embeddings needs one dictionary for both languages: binarize again with "
                "fairseq-preprocess --joined-dictionary (or --srcdict of the other side), or train without "
                f"--share-all-embeddings ({PAGE}#shared-embeddings-need-a-joined-dictionary)")
    match = _SIZE.search(text)
    if match:
        return _too_long(*(_NUMPY_SCALAR.sub(r"\1", g) for g in match.groups()), tool, argv)
    return _overridden_parameters(err, tool, argv) or _other_checkpoint(err, tool, argv) or no_space(err, argv)


def _too_long(sentence, lengths, limits, tool, argv):
    """The size message: which flag helps depends on where the limit comes from."""
    said = (f"sentence #{sentence} has (source, target) lengths ({lengths}) but the model takes at most "
            f"({limits}) positions")
    if tool in TRAINING_TOOLS:
        fix = ("raise --max-source-positions / --max-target-positions (and a fixed-length mixer's own limit, e.g. "
               "--linearnet-max-length), filter the corpus, or skip such sentences with "
               "--skip-invalid-size-inputs-valid-test")
    else:
        from .checkpoint_files import CheckpointFileError, stored_model

        path = (option(argv, "--path") or "").split(":")[0]
        try:
            precomputed = (stored_model(path) or ("", {}))[1].get("posnet_precomputed") if path else None
        except CheckpointFileError:
            precomputed = None
        if precomputed:
            fix = (f"{path} holds PosNet tables of {precomputed} positions: run posnet-precompute again on the "
                   "training checkpoint with a larger --max-length")
        else:
            fix = ("a model's positions are set when it is trained: train with a larger --max-source-positions / "
                   "--max-target-positions (posnet-train)")
        fix += ", or skip such sentences with --skip-invalid-size-inputs-valid-test"
    return f"{said}: {fix} ({PAGE}#size-of-sample-is-invalid)"
