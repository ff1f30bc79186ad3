"""The few shims that make fairseq 0.12 usable on today's Python and torch.

* ``check_fairseq()`` refuses fairseq builds the plugin cannot work with:
  PyPI's ``fairseq==0.12.2`` (its encoder layer reads ``self_attn.q_proj`` for
  the BetterTransformer fast path, so no mixer other than MultiheadAttention can
  sit there) and fairseq that does not import on Python 3.11.
* ``allow_fairseq_checkpoint_classes()`` keeps torch's safe loader
  (``weights_only=True``) on and allow-lists exactly the classes that
  fairseq-train pickles into a checkpoint.
"""
import argparse
import inspect

import numpy as np
import torch

INSTALL_HINT = (
    "posnet_fairseq needs a fairseq 0.12 build from upstream main that imports on "
    "Python 3.11, e.g. `pip install --no-deps --no-build-isolation fairseq-fixed==0.12.3.1` "
    "(or simply run ./setup.sh from the posnet-fairseq checkout)."
)


class UnsupportedFairseqError(ImportError):
    pass


def check_fairseq(encoder_layer_cls=None):
    """Raises UnsupportedFairseqError unless fairseq imports and its encoder layer
    can host any mixer (``encoder_layer_cls`` defaults to fairseq's own)."""
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
    from numpy._core import multiarray

    classes = [argparse.Namespace, np.ndarray, np.dtype, multiarray._reconstruct]
    classes += [type(np.dtype(t)) for t in (np.int64, np.int32, np.float64, np.float32, np.bool_)]
    return classes


def allow_fairseq_checkpoint_classes():
    torch.serialization.add_safe_globals(fairseq_checkpoint_classes())
