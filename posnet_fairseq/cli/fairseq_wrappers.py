"""``posnet-train`` / ``-generate`` / ``-interactive`` / ``-validate``: fairseq's CLIs with ``--user-dir`` added.

fairseq-generate and -interactive never import the plugin named in a
checkpoint's config, so without ``--user-dir`` they cannot rebuild a
``posnet_transformer``; these wrappers add it unless it is already given.

The evaluation wrappers also default ``--required-batch-size-multiple`` to 1:
fairseq main's ``data_utils.batch_by_size`` drops the last batch when its size
is not a multiple of it (default 8), so stock fairseq-generate silently skips
up to 7 sentences of a test set.

What the wrappers add to fairseq's own behaviour:

* ``--help`` lists the model's flags with the architecture's values
  (fairseq prints its help before it adds them; :mod:`posnet_fairseq.presets`);
  ``posnet-train --arch X --show-preset [Y]`` prints where X differs from Y
  (default: the model's defaults);
* errors users meet are said directly, with the fixing flag
  (:mod:`posnet_fairseq.troubleshooting`, docs/troubleshooting.md); a model
  flag the plugin refuses is printed alone with exit status 2, as argparse
  does, also when ``--save-dir`` holds a checkpoint to resume; a
  ``--model-overrides`` that would change what the model is (its mixers,
  its shapes) is refused: it changes how a model decodes;
* checkpoints are checked before fairseq reads them: a truncated or missing
  ``--path`` is said in one line; ``posnet-train`` refuses to resume a
  ``--save-dir`` whose ``checkpoint_last.pt`` holds another model (another
  ``--arch`` or plugin flag: fairseq would load it without a word when the
  parameter names match); the evaluation tools say that ``--arch`` is not
  used (the checkpoint's architecture is);
* Ctrl-C and SIGTERM print one line and exit 130 / 143
  (:mod:`posnet_fairseq.cli.interruption`); a full disk says which directory,
  and the ``.tmp`` checkpoint fairseq was writing is removed;
* fairseq's "Please install tensorboardX" line is left out unless
  ``--tensorboard-logdir`` is given.
"""
import argparse
import glob
import os
import sys

from .. import presets, troubleshooting
from ..plugin import PLUGIN_DIR
from . import interruption

HELP = ("-h", "--help")


def _has_flag(argv, flag):
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def _given(argv):
    """The --arch and --path of a command line (None where not given)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--arch", "-a")
    parser.add_argument("--path")
    return parser.parse_known_args(argv)[0]


def _with_user_dir(argv):
    return argv if _has_flag(argv, "--user-dir") else argv + ["--user-dir", PLUGIN_DIR]


def _keeping_every_sentence(argv):
    if _has_flag(argv, "--required-batch-size-multiple"):
        return argv
    return argv + ["--required-batch-size-multiple", "1"]


def _parser(module_name):
    from fairseq import options

    return {"train": options.get_training_parser, "generate": options.get_generation_parser,
            "interactive": options.get_interactive_generation_parser,
            "validate": options.get_validation_parser}[module_name]()


def print_help(module_name, argv):
    """fairseq's help for the tool, then the model flags with the values of ``--arch`` (with the
    command line's model flags) or of the checkpoint at ``--path``; without either, the defaults."""
    from fairseq.tasks import TASK_REGISTRY

    parser = _parser(module_name)
    parser.prog = f"posnet-{module_name}"
    known, _ = parser.parse_known_args([a for a in argv if a not in HELP])
    if getattr(known, "task", None) in TASK_REGISTRY:
        TASK_REGISTRY[known.task].add_args(parser)
    arch, path = _given(argv).arch, _given(argv).path
    note = None
    if arch:
        values, source = presets.resolve(arch, argv), arch
    elif path:
        arch, values = presets.checkpoint_values(path)
        source = "checkpoint"
        note = "The values stored in --path; change one with --model-overrides \"{'name': value}\"."
    else:
        arch, values, source = presets.MODEL, presets.resolve(presets.MODEL), "default"
        note = "Give --arch ARCH to see the values of a preset."
    presets.add_model_help(parser, arch, values, source, note)
    if module_name == "train":
        parser.add_argument_group("posnet-train").add_argument(
            "--show-preset", nargs="?", metavar="OTHER_ARCH",
            help=f"print the model flags on which --arch differs from OTHER_ARCH (default: {presets.MODEL}, "
                 "the model's defaults) and exit")
    parser.print_help()


def _check_arch(module_name, argv):
    from fairseq.models import ARCH_MODEL_REGISTRY  # the plugin's architectures are registered by now

    arch = _given(argv).arch
    if arch is not None and arch not in ARCH_MODEL_REGISTRY:
        sys.exit(f"posnet-{module_name}: --arch {arch}: not a registered architecture"
                 + presets.suggest(arch, ARCH_MODEL_REGISTRY))


def _show_preset(argv):
    i = argv.index("--show-preset")
    given = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") else None
    rest = argv[:i] + argv[i + 1 + (given is not None):]
    arch = _given(rest).arch
    if arch is None:
        sys.exit("posnet-train --show-preset: give the preset with --arch ARCH")
    try:
        print(presets.difference_text(arch, given or presets.MODEL, rest))
    except ValueError as err:
        sys.exit(f"posnet-train --show-preset: {err}")


def _resumed_checkpoint(argv):
    """The checkpoint posnet-train ARGV resumes from when it exists (fairseq: --save-dir's checkpoint_last.pt
    unless --restore-file names another), else None."""
    if troubleshooting.option(argv, "--restore-file", "checkpoint_last.pt") != "checkpoint_last.pt" or \
            _has_flag(argv, "--checkpoint-suffix"):
        return None  # a checkpoint chosen on purpose, e.g. to fine-tune another model
    path = os.path.join(troubleshooting.option(argv, "--save-dir", "checkpoints"), "checkpoint_last.pt")
    return path if os.path.exists(path) else None


def _refused_model_flag(argv):
    """The plugin's refusal of a model flag's value on ``posnet-train ARGV`` (as building the model says it),
    else None. Checked before the resume check, which would call a bad value "a checkpoint of another model"."""
    from .. import flags

    arch = _given(argv).arch
    if arch is None:
        return None
    try:  # an architecture's own values may read a flag, hence check it, already
        values = argparse.Namespace(**presets.resolve(arch, argv))
        for group in flags.GROUPS:
            group.options(values)
    except ValueError as err:
        if troubleshooting.flag_error(err) is None:
            raise
        return str(err)
    return None


def _check_checkpoints(module_name, argv):
    """A message for a checkpoint the command would read that is unreadable or holds another model, else None."""
    from .. import flags
    from ..checkpoint_files import CheckpointFileError, differences, model_of, load, restore_interrupted_copy

    if module_name != "train":
        for path in filter(None, (troubleshooting.option(argv, "--path") or "").split(":")):
            try:
                load(path, mmap=True)
            except CheckpointFileError as err:
                return f"--path {err}"
        return troubleshooting.architecture_override(troubleshooting.option(argv, "--model-overrides"))
    path, arch = _resumed_checkpoint(argv), _given(argv).arch
    if path is None or arch is None:
        return None
    try:
        stored = model_of(load(path, mmap=True))
    except CheckpointFileError as err:
        source = restore_interrupted_copy(path)
        if source is None:
            return f"{err} (posnet-train resumes from it; move it away to train from update 0)"
        print(f"posnet-train: {path} was truncated (a training stopped while fairseq copied it there); restored "
              f"from {source}, the newest intact checkpoint of the run, to resume from", file=sys.stderr)
        stored = model_of(load(path, mmap=True))
    plugin_flags = {f.dest for group in flags.GROUPS for f in group.flags}
    differing = differences((arch, presets.resolve(arch, argv)), stored, only=plugin_flags) if stored else []
    if differing:
        return (f"--save-dir {os.path.dirname(path)} holds a checkpoint of another model ({', '.join(differing)}: "
                f"this command vs {os.path.basename(path)}), which it would resume from: give a new --save-dir, or "
                f"the checkpoint's architecture and model flags to resume it ({troubleshooting.PAGE}"
                "#a-checkpoint-of-another-data-bin-or-model)")
    return None


def _warn_unused_arch(module_name, argv):
    """The evaluation tools rebuild the model stored in --path; a --arch on their command line is not used."""
    from ..checkpoint_files import CheckpointFileError, stored_model

    arch, path = _given(argv).arch, (_given(argv).path or "").split(":")[0]
    if arch is None or not path:
        return
    try:
        stored = (stored_model(path) or ("unknown",))[0]
    except CheckpointFileError:
        return
    print(f"posnet-{module_name}: warning: --arch {arch} is not used: the model is rebuilt as the checkpoint "
          f"stores it (--arch {stored}, {path}); change a stored setting with --model-overrides "
          "\"{'name': value}\"", file=sys.stderr)


def _remove_partial_checkpoints(argv):
    """fairseq writes a checkpoint to NAME.pt.tmp, then renames it; an interrupted write leaves the .tmp file."""
    save_dir = troubleshooting.option(argv, "--save-dir", "checkpoints")
    for path in glob.glob(os.path.join(glob.escape(save_dir), "*.pt.tmp")):
        os.remove(path)


def _run(module_name, evaluation=False):
    argv = sys.argv[1:]
    resumes = module_name == "train" and not _has_flag(argv, "--no-save")
    interruption.run(f"posnet-{module_name}", lambda: _tool(module_name, argv, evaluation), resumes=resumes,
                     end_process=True)


def _tool(module_name, argv, evaluation):
    import importlib

    sys.argv = [sys.argv[0]] + _with_user_dir(argv)  # fairseq's parsers read --user-dir from sys.argv
    if module_name == "train" and "--show-preset" in argv:
        return _show_preset(argv)
    _check_arch(module_name, argv)
    if any(a in HELP for a in argv):
        return print_help(module_name, argv)
    refused = _refused_model_flag(argv) if module_name == "train" else None
    if refused:
        print(f"posnet-{module_name}: error: {refused}", file=sys.stderr)
        sys.exit(2)
    problem = troubleshooting.check_command_line(argv) or _check_checkpoints(module_name, argv)
    if problem:
        sys.exit(f"posnet-{module_name}: {problem}")
    if evaluation:
        _warn_unused_arch(module_name, argv)
    full = _with_user_dir(argv)
    sys.argv = [sys.argv[0]] + (_keeping_every_sentence(full) if evaluation else full)
    try:
        importlib.import_module(f"fairseq_cli.{module_name}").cli_main()
    except Exception as err:  # noqa: BLE001  (re-raised unless it is one the troubleshooting page explains)
        explanation = troubleshooting.explain(err, module_name, argv)
        if explanation is None and troubleshooting.flag_error(err):
            print(f"posnet-{module_name}: error: {err}", file=sys.stderr)
            sys.exit(2)
        if explanation is None:
            raise
        if module_name == "train" and troubleshooting.no_space(err, argv):
            _remove_partial_checkpoints(argv)
        sys.exit(f"posnet-{module_name}: {explanation}")
    except KeyboardInterrupt:
        if module_name == "train":
            _remove_partial_checkpoints(argv)
        raise


def train():
    _run("train")


def generate():
    _run("generate", evaluation=True)


def interactive():
    _run("interactive", evaluation=True)


def validate():
    _run("validate", evaluation=True)


if __name__ == "__main__":  # python -m posnet_fairseq.cli.fairseq_wrappers {train,generate,...} ARGS (posnet-compare)
    tool = sys.argv.pop(1)
    {"train": train, "generate": generate, "interactive": interactive, "validate": validate}[tool]()
