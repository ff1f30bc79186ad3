"""Where the plugin lives, for the fairseq subprocesses the tools start.

fairseq imports a plugin from ``--user-dir PLUGIN_DIR``; a subprocess also
needs the package's parent directory on ``PYTHONPATH`` so that the package
imports under its own name (``posnet_fairseq``) whatever the working directory.
"""
import os

PLUGIN_DIR = os.path.dirname(os.path.abspath(__file__))


def subprocess_env(**overrides) -> dict:
    """os.environ with the plugin's parent directory first on PYTHONPATH, plus ``overrides``."""
    path = os.pathsep.join(filter(None, [os.path.dirname(PLUGIN_DIR), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, **overrides)
