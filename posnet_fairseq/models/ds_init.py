"""Depth-scaled initialisation (DS-Init; Zhang, Titov & Sennrich, 2019), for any mixer's model.

The AAN+ paper trains its deep (12 + 12 layer, post-norm) models of Table 4
with it (section 6.3.6): without it, a deep post-norm Transformer's gradients
vanish towards the lower layers. DS-Init draws every weight matrix
W (d_i x d_o) of layer l of a stack from

    W ~ U(-gamma * alpha / sqrt(l), +gamma * alpha / sqrt(l)),   gamma = sqrt(6 / (d_i + d_o)),

Xavier's uniform range scaled by alpha / sqrt(l), where l = 1..L is the
layer's depth in its own stack (encoder and decoder counted separately) and
alpha in (0, 1] a hyperparameter (``--ds-init-alpha``, 1 by default, as the
authors' released configuration's gain of 1).

Which weights: every ``nn.Linear`` inside an encoder or decoder layer - the
self-attention (or whichever mixer the site uses: AAN+'s gate and WET
projection, SSRU's, rPosNet's, ...), the cross-attention and both
feed-forward matrices. Biases, LayerNorms, embeddings, the output projection
and the non-matrix parameters of mixers (position tables, kernels) keep their
initialisation, as in the paper, which scales the layers' weight matrices only.

The authors' TensorFlow code (bzhangGo/zero, ``deep_transformer_init``) passes
``gain * l ** -0.5`` as the *variance* scale of TF's fan-average uniform
initialiser, i.e. a range of gamma * l^(-1/4); this follows the paper's
formula above (range 1/sqrt(l)), which the AAN+ paper cites.
"""
import math

from torch import nn

from .. import flags

FLAGS = flags.declare(
    "Depth-scaled initialisation (DS-Init, Zhang, Titov & Sennrich 2019)", "model",
    flags.Flag("--ds-init", False, "initialise every weight matrix of layer l (1-based, per stack) from "
               "U(-a*sqrt(6/(d_in+d_out))/sqrt(l), +...): the AAN+ paper's deep models (Table 4)"),
    flags.Flag("--ds-init-alpha", 1.0, "alpha of --ds-init, in (0, 1]", type=float, metavar="ALPHA",
               check=lambda alpha: None if 0.0 < alpha <= 1.0 else "expected 0 < alpha <= 1"),
)


def bound(linear, depth, alpha):
    """The half-width of DS-Init's uniform range for one ``nn.Linear`` at 1-based ``depth``."""
    return alpha * math.sqrt(6.0 / (linear.in_features + linear.out_features)) / math.sqrt(depth)


def depth_scaled_init(model, args):
    """Re-draws the layers' weight matrices of ``model`` (a built encoder-decoder) when ``--ds-init`` is on."""
    opts = FLAGS.options(args)
    if not opts.ds_init:
        return
    alpha = opts.ds_init_alpha
    for stack in (model.encoder, model.decoder):
        for depth, layer in enumerate(stack.layers, start=1):
            for module in layer.modules():
                if isinstance(module, nn.Linear):
                    limit = bound(module, depth, alpha)
                    nn.init.uniform_(module.weight, -limit, limit)
