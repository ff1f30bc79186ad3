"""The few shims that make fairseq 0.12 usable on today's Python and torch.

* ``check_versions()`` refuses a Python or torch outside the range the plugin
  is proven on (``docs/install.md`` lists the runs): Python 3.10-3.13, torch
  2.6-2.14. Run as a script (``python posnet_fairseq/compat.py``) it makes the
  same check without importing fairseq; ``setup.sh`` uses it before building.
* ``check_fairseq()`` runs ``check_versions()``, then refuses fairseq builds the
  plugin cannot work with: PyPI's ``fairseq==0.12.2`` (its encoder layer reads
  ``self_attn.q_proj`` for the BetterTransformer fast path, so no mixer other
  than MultiheadAttention can sit there) and fairseq that does not import on
  Python 3.11.
* ``allow_fairseq_checkpoint_classes()`` keeps torch's safe loader
  (``weights_only=True``) on and allow-lists exactly the classes that
  fairseq-train pickles into a checkpoint.
* ``make_checkpoint_copies_atomic()`` makes fairseq-train's copies of a saved
  checkpoint (to ``checkpoint_last.pt`` and the other names of a save) atomic,
  as its first write already is.
"""
import argparse
import inspect
import re
import sys

# Inclusive (major, minor) bounds.
PYTHON_RANGE = ((3, 10), (3, 13))
TORCH_RANGE = ((2, 6), (2, 14))
# Why the bounds are where they are (docs/install.md has the runs).
PYTHON_TOO_OLD = "requirements/runtime.txt pins numpy 2.2.6 and scikit-learn 1.7.2, which need Python >= 3.10"
PYTHON_TOO_NEW = "newer Pythons have not been tested with fairseq-fixed and the plugin"
TORCH_TOO_OLD = (
    "torch < 2.6 unpickles checkpoints by default, so fairseq's torch.load would run "
    "code stored in a checkpoint"
)
TORCH_TOO_NEW = "newer torch releases have not been tested with the plugin"

INSTALL_HINT = (
    "posnet_fairseq needs a fairseq 0.12 build from upstream main that imports on "
    "Python 3.11, e.g. `pip install --no-deps --no-build-isolation fairseq-fixed==0.12.3.1` "
    "(or simply run ./setup.sh from the posnet-fairseq checkout)."
)


def _dotted(version):
    return ".".join(map(str, version))


class UnsupportedEnvironmentError(ImportError):
    pass


def check_python(version_info=sys.version_info):
    (low, high), have = PYTHON_RANGE, tuple(version_info[:2])
    if low <= have <= high:
        return
    reason = PYTHON_TOO_NEW if have > high else PYTHON_TOO_OLD
    raise UnsupportedEnvironmentError(
        f"posnet_fairseq supports Python {_dotted(low)} to {_dotted(high)}; this is Python "
        f"{_dotted(version_info[:3])} ({reason}). Install Python {_dotted(high)} (e.g. `pyenv install "
        f"{_dotted(high)}`), make an environment with it and install there: `bash setup.sh` "
        "(fresh .venv) or `bash setup.sh --current-env` (docs/install.md)."
    )


def check_torch(version):
    """``version`` is ``torch.__version__``, e.g. ``2.6.0+cu124`` or ``2.13.0+cpu``."""
    (low, high) = TORCH_RANGE
    match = re.match(r"(\d+)\.(\d+)", version)
    have = (int(match.group(1)), int(match.group(2))) if match else None
    if have is not None and low <= have <= high:
        return
    reason = TORCH_TOO_OLD if have is not None and have < low else TORCH_TOO_NEW
    raise UnsupportedEnvironmentError(
        f"posnet_fairseq supports torch {_dotted(low)} to {_dotted(high)}; this environment has "
        f"torch {version} ({reason}). Install a torch in that range built for your CUDA, e.g. "
        f"`pip install 'torch>={_dotted(low)},<{high[0]}.{high[1] + 1}'`, then `bash setup.sh "
        "--current-env` (docs/install.md)."
    )


def check_versions():
    check_python()
    import torch

    check_torch(torch.__version__)


class UnsupportedFairseqError(ImportError):
    pass


def check_fairseq(encoder_layer_cls=None):
    """Raises UnsupportedFairseqError unless fairseq imports and its encoder layer
    can host any mixer (``encoder_layer_cls`` defaults to fairseq's own)."""
    check_versions()
    try:
        import fairseq
        from fairseq.modules import transformer_layer
    except ValueError as err:  # "mutable default ... for field common" on Python >= 3.11
        raise UnsupportedFairseqError(
            f"fairseq does not import on this Python ({err}). {INSTALL_HINT}"
        ) from err
    except ImportError as err:
        raise UnsupportedFairseqError(f"fairseq is not importable ({err}). {INSTALL_HINT}") from err
    layer_cls = encoder_layer_cls or transformer_layer.TransformerEncoderLayerBase
    if "q_proj" in inspect.getsource(layer_cls.__init__):
        raise UnsupportedFairseqError(
            f"fairseq {fairseq.__version__} has the BetterTransformer encoder layer (fairseq==0.12.2), "
            "which reads self_attn.q_proj and so cannot host a position-based mixer. " + INSTALL_HINT
        )


def fairseq_checkpoint_classes():
    """The non-tensor classes a fairseq-train checkpoint contains.

    argparse.Namespace: ``cfg.model`` of legacy (argparse) models such as ours.
    numpy arrays/dtypes: the metric meters written with ``--eval-bleu``.
    """
    import numpy as np
    from numpy._core import multiarray

    classes = [argparse.Namespace, np.ndarray, np.dtype, multiarray._reconstruct]
    classes += [type(np.dtype(t)) for t in (np.int64, np.int32, np.float64, np.float32, np.bool_)]
    return classes


def allow_fairseq_checkpoint_classes():
    import torch

    torch.serialization.add_safe_globals(fairseq_checkpoint_classes())


def make_checkpoint_copies_atomic():
    """fairseq-train writes a checkpoint once, to a temporary file renamed over the target, then copies it to
    the save's other names with a plain copy (``PathManager.copy``). A training stopped during that copy (a
    preempted, cancelled or requeued job) left ``checkpoint_last.pt`` truncated, so the next run could not
    resume. The copy now goes to a temporary file renamed over the target too, wherever the path supports a
    rename (the same condition as fairseq's own atomic write); a stop leaves the previous file whole."""
    from fairseq.file_io import PathManager

    plain = PathManager.copy
    if getattr(plain, "posnet_atomic", False):
        return

    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if not overwrite or not PathManager.supports_rename(dst_path):
            return plain(src_path, dst_path, overwrite)
        partial = dst_path + ".tmp"
        copied = plain(src_path, partial, True)
        if copied:
            PathManager.rename(partial, dst_path)
        return copied

    copy.posnet_atomic = True
    PathManager.copy = staticmethod(copy)


def main(argv=None):
    """``python posnet_fairseq/compat.py [--python-only]``: exit 1 with the reason
    when this interpreter (and its torch) is outside the supported range."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--python-only", action="store_true", help="check the Python version alone")
    args = parser.parse_args(argv)
    try:
        check_python()
        if args.python_only:
            return 0
        try:
            import torch
        except ImportError as err:
            raise UnsupportedEnvironmentError(
                f"torch does not import in {sys.executable} ({err}). Install torch "
                f"{_dotted(TORCH_RANGE[0])} to {_dotted(TORCH_RANGE[1])} there first, or run "
                "`bash setup.sh` without --current-env for a fresh .venv (docs/install.md)."
            ) from err
        check_torch(torch.__version__)
    except UnsupportedEnvironmentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
