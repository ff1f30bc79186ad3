"""``posnet-train`` / ``-generate`` / ``-interactive`` / ``-validate``: fairseq's CLIs with ``--user-dir`` added.

fairseq-generate and -interactive never import the plugin named in a
checkpoint's config, so without ``--user-dir`` they cannot rebuild a
``posnet_transformer``; these wrappers add it unless it is already given.
"""
import os
import sys

PLUGIN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _with_user_dir(argv):
    if any(a == "--user-dir" or a.startswith("--user-dir=") for a in argv):
        return argv
    return argv + ["--user-dir", PLUGIN_DIR]


def _run(module_name):
    import importlib

    sys.argv = [sys.argv[0]] + _with_user_dir(sys.argv[1:])
    importlib.import_module(f"fairseq_cli.{module_name}").cli_main()


def train():
    _run("train")


def generate():
    _run("generate")


def interactive():
    _run("interactive")


def validate():
    _run("validate")
