"""``posnet-train`` / ``-generate`` / ``-interactive`` / ``-validate``: fairseq's CLIs with ``--user-dir`` added.

fairseq-generate and -interactive never import the plugin named in a
checkpoint's config, so without ``--user-dir`` they cannot rebuild a
``posnet_transformer``; these wrappers add it unless it is already given.

The evaluation wrappers also default ``--required-batch-size-multiple`` to 1:
fairseq main's ``data_utils.batch_by_size`` drops the last batch when its size
is not a multiple of it (default 8), so stock fairseq-generate silently skips
up to 7 sentences of a test set.
"""
import sys

from ..plugin import PLUGIN_DIR


def _has_flag(argv, flag):
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def _with_user_dir(argv):
    return argv if _has_flag(argv, "--user-dir") else argv + ["--user-dir", PLUGIN_DIR]


def _keeping_every_sentence(argv):
    if _has_flag(argv, "--required-batch-size-multiple"):
        return argv
    return argv + ["--required-batch-size-multiple", "1"]


def _run(module_name, evaluation=False):
    import importlib

    argv = _with_user_dir(sys.argv[1:])
    sys.argv = [sys.argv[0]] + (_keeping_every_sentence(argv) if evaluation else argv)
    importlib.import_module(f"fairseq_cli.{module_name}").cli_main()


def train():
    _run("train")


def generate():
    _run("generate", evaluation=True)


def interactive():
    _run("interactive", evaluation=True)


def validate():
    _run("validate", evaluation=True)
