"""``tisa``: translation-invariant self-attention (Wennberg & Henter, 2021).

Every head h of every layer gets a positional scoring function of the relative
distance k = j - i between key j and query i, a sum of S radial basis kernels

    f_h(k) = sum_{s=1..S} a_{h,s} exp(-|b_{h,s}| (k - c_{h,s})^2),

which is added to the content logits after the 1/sqrt(d) scaling and before
masking and softmax (the paper's Eq. 4):

    softmax(Q K^T / sqrt(d) + F) V,        F[h, i, j] = f_h(j - i).

Used (a) beside the model's position embeddings or (b) instead of them
(``--no-token-positional-embeddings``); S = 0 with (b) is the bag-of-words
baseline. 3 S H parameters per layer, F is computed for the actual length, so
there is no maximum length.

TISA is a distance-only logit bias: :class:`TisaScorer` is a
:class:`~.content_attention.DistanceBias` (its profile is f_h) and a host
attention adds F to its logits. Hosts:

* ``tisa`` -- content attention (``content_attention.py``), as ALiBi, T5
  and KERPLE; with S = 0 it is fairseq's MultiheadAttention itself (``mha``);
* ``tisa_shaw`` -- Shaw et al.'s relative attention (``shaw.py``), whose
  ``logit_bias`` hook takes the scorer directly. Shaw stays a host of its own:
  its relative term depends on the query (q_i . a_{j-i}) and may add a value
  term, so it is no logit bias that content attention could take.

Cross attention has no relative distance between a target and a source
position, so neither mixer serves the cross site.

Porting parameters of the reference code (ulmewennberg/tisa, ``model/tisa.py``):
it builds F[i, j] = f(i - j - 1) with [S, H] parameters; the paper's orientation
used here is f(j - i), hence c_here = -c_code - 1 (a and b unchanged), see
:meth:`TisaScorer.load_reference_parameters`.
"""

import torch
from torch import Tensor, nn

from .. import families, flags
from .attention import autocast_off
from .content_attention import ContentAttention, DistanceBias
from .fused_attention import masked_bias
from .registry import register_mixer
from .shaw import ShawRelativeAttention

INIT_MODES = ("random", "local")


FLAGS = flags.declare(
    "TISA", "tisa",
    flags.Flag("--tisa-kernels", 5, "radial basis kernels per head of TISA's positional scoring function f_h "
               "(0 = no positional score: with --no-token-positional-embeddings the bag-of-words baseline)",
               type=int, metavar="S", check=flags.non_negative_integer),
    flags.Flag("--tisa-init", "random", "TISA kernel initialisation: 'random' (the reference code: "
               "c ~ N(0, 5^2), a ~ N(0.1, 0.01^2), b ~ N(0.1, 0.01^2)) or 'local' (deterministic: centres evenly "
               "spaced on -2..2, a = b = 0.1)", choices=INIT_MODES),
)


class KernelSum(torch.autograd.Function):
    """f_h(k) = sum_s a_{h,s} exp(-|b_{h,s}| (k - c_{h,s})^2) at N distances k, for the heads of one or more
    layers: (L H) x N (in fp32, or fp64 for fp64 parameters), from ``parameters``, each layer's H x S c, a and b
    in turn (c_1, a_1, b_1, c_2, ...), with its gradient written out: every operator is a kernel launch on a GPU,
    and autograd's backward of the formula runs about twice the forward's; here the sums over distances are
    matrix products. The layers' parameters are stacked in one op (and cast to fp32) inside the function, their
    gradients made in one tensor, unbound and cast back in its backward: stacking them outside would record an
    autograd node for each stack and each cast, host time of every training step (issue 48)."""

    @staticmethod
    def forward(ctx, k: Tensor, *parameters: Tensor) -> Tensor:
        # c_1 .. c_L, a_1 .. a_L, b_1 .. b_L: the stack's rows as three L H x S blocks, each contiguous.
        stacked = torch.stack(parameters[0::3] + parameters[1::3] + parameters[2::3])
        stacked = stacked.to(torch.promote_types(stacked.dtype, torch.float32))  # fp32 at least
        c, a, b = stacked.view(3, -1, stacked.size(-1))  # each L H x S
        offset = k - c.unsqueeze(-1)  # L H x S x N: k - c
        square = offset * offset
        width = b.abs()
        kernel = torch.exp(square * width.neg().unsqueeze(-1))
        ctx.save_for_backward(offset, square, kernel, a, b, width)
        ctx.dtype = parameters[0].dtype
        with autocast_off(kernel):  # the sum over kernels in fp32 too, under --amp
            return torch.bmm(a.unsqueeze(1), kernel).squeeze(1)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):
        with autocast_off(grad):
            grads = KernelSum._gradients(ctx, grad)  # 3 L x H x S: c_1 .. c_L, a_1 .. a_L, b_1 .. b_L
        if grads.dtype != ctx.dtype:
            grads = grads.to(ctx.dtype)
        grads, layers = grads.unbind(0), len(grads) // 3
        in_turn = (grads[kind * layers + layer] for layer in range(layers) for kind in range(3))  # c_1, a_1, ..
        return None, *(g if wanted else None for g, wanted in zip(in_turn, ctx.needs_input_grad[1:]))

    @staticmethod
    def _gradients(ctx, grad: Tensor) -> Tensor:
        """The gradients of every layer's c, then a, then b: 3 L x H x S (one tensor: one unbind gives each)."""
        offset, square, kernel, a, b, width = ctx.saved_tensors
        heads, kernels, n = kernel.shape
        layers = (len(ctx.needs_input_grad) - 1) // 3
        grad_a = torch.bmm(kernel, grad.unsqueeze(-1))
        # The gradient at the exponent -|b| (k - c)^2, summed over distances against its derivatives:
        # -(k - c)^2 for |b|, 2 |b| (k - c) for c.
        exponent = (kernel * (a.unsqueeze(-1) * grad.unsqueeze(1))).view(heads * kernels, 1, n)
        grad_b = torch.bmm(exponent, square.view(heads * kernels, n, 1)).view(heads, kernels) * torch.sign(b).neg()
        grad_c = torch.bmm(exponent, offset.view(heads * kernels, n, 1)).view(heads, kernels) * width * 2
        return torch.stack([g.view(heads, kernels) for g in (grad_c, grad_a, grad_b)]).view(3 * layers, -1, kernels)


def kernel_sums(scorers, distances: Tensor) -> Tensor:
    """f_h(k) of every head of every scorer in ``scorers`` at the given distances (any shape N): (L H) x N,
    fp32, in one KernelSum."""
    # fp32 even when the model runs in fp16/bf16: the squared distances
    # reach ~1e5 at a few hundred tokens and exp of them underflows early.
    return KernelSum.apply(distances.float().reshape(-1), *(tensor for scorer in scorers for tensor in (
        scorer.offsets, scorer.amplitudes, scorer.sharpness)))


class TisaScorer(DistanceBias):
    """The per-head positional scores F[b, h, i, j] = f_h(pos_j - pos_i), in fp32.

    Called as ``scorer(query_positions B x T, key_positions B x S)`` (either
    batch may be 1; 0-based positions below max(T, S)), it returns
    B x H x T x S: :class:`DistanceBias` evaluates f once per distinct
    distance and gathers the Toeplitz pattern; teacher-forced, f's few
    elementwise operators run on the T x T distances themselves
    (``ELEMENTWISE``), which spares the gather and its gradient's scatter.
    """

    ELEMENTWISE = True

    def __init__(self, num_heads: int, num_kernels: int, init: str = "random"):
        super().__init__()
        if num_kernels < 1:
            raise ValueError(f"--tisa-kernels {num_kernels}: a scorer needs at least one kernel")
        self.num_heads, self.num_kernels = num_heads, num_kernels
        # Layout H x S (the reference code uses S x H; see load_reference_parameters). Three parameters, not one
        # joined tensor: a run's optimizer state (checkpoint_last.pt) holds Adam's moments for each, in this order.
        self.offsets = nn.Parameter(torch.empty(num_heads, num_kernels))     # c
        self.amplitudes = nn.Parameter(torch.empty(num_heads, num_kernels))  # a
        self.sharpness = nn.Parameter(torch.empty(num_heads, num_kernels))   # b
        # The side's scorers (share_with; a plain list: each layer owns its scorer) and this one's place in it.
        self.forward_context, self.layers, self.layer = None, (), 0
        self.reset_parameters(init)

    def reset_parameters(self, init: str):
        with torch.no_grad():
            if init == "random":
                self.offsets.normal_(0.0, 5.0)
                self.amplitudes.normal_(0.1, 0.01)
                self.sharpness.normal_(0.1, 0.01)
            elif init == "local":
                # Every head starts as the same smooth bump over distances -2..2;
                # the content projections break the symmetry between heads.
                centres = torch.linspace(-2.0, 2.0, self.num_kernels) if self.num_kernels > 1 else torch.zeros(1)
                self.offsets.copy_(centres.expand(self.num_heads, -1))
                self.amplitudes.fill_(0.1)
                self.sharpness.fill_(0.1)
            else:
                raise ValueError(f"--tisa-init {init}: choose from {', '.join(INIT_MODES)}")

    def profile(self, distances: Tensor) -> Tensor:
        """f_h(k) for every head at the given distances (any shape N): H x N, fp32."""
        return kernel_sums([self], distances)

    def share_with(self, forward_context):
        """Joins the side's TISA scorers (``forward_context``, the side's): a teacher-forced call computes the
        biases of all its layers at once (:meth:`on_grid`)."""
        self.forward_context, self.layers = forward_context, forward_context.register("tisa", self)
        self.layer = len(self.layers) - 1

    def on_grid(self, grid: Tensor) -> Tensor:
        """1 x H x T x S: f_h at every distance of ``grid``. In a call of a side whose layers share their work
        (:meth:`share_with`), one KernelSum for every layer's heads, made at the first layer: each operator is
        a kernel launch on a GPU (issue 48), and the layers' biases differ in their parameters only."""
        if not self._layers_share():
            return super().on_grid(grid)
        return self._every_layer(grid, ("tisa_on_grid",), lambda biases: biases)

    def masked_on_grid(self, grid: Tensor, invalid, q: Tensor) -> Tensor:
        """:meth:`on_grid` as fused attention's mask; where the layers share their work, every layer's masked at
        once (one masking per side, not per layer, and one for its gradient)."""
        if not self._layers_share():
            return super().masked_on_grid(grid, invalid, q)
        return self._every_layer(grid, ("tisa_masked_on_grid", q.dtype, q.size(0)),
                                 lambda biases: masked_bias(biases, invalid, q), invalid)

    def _layers_share(self) -> bool:
        return len(self.layers) > 1 and self.forward_context.in_call

    def _every_layer(self, grid: Tensor, key, make, anchor=None) -> Tensor:
        """This layer's part of ``make`` (of every layer's bias, L x 1 x H x T x S), made once per call (``key``,
        ``anchor``: ``ForwardContext.shared``) for all the side's layers."""
        def every():
            biases = kernel_sums(self.layers, grid).view(len(self.layers), 1, self.num_heads, *grid.shape)
            return make(biases).unbind(0)

        return self.forward_context.shared((*key, grid.shape, grid.device), every, anchor)[self.layer]

    def load_reference_parameters(self, kernel_offsets: Tensor, kernel_amplitudes: Tensor,
                                  kernel_sharpness: Tensor):
        """Loads S x H parameters of the reference ``Tisa`` module (F[i, j] = f(i - j - 1))."""
        with torch.no_grad():
            self.offsets.copy_(-kernel_offsets.t() - 1)
            self.amplitudes.copy_(kernel_amplitudes.t())
            self.sharpness.copy_(kernel_sharpness.t())

    def extra_repr(self):
        return f"heads={self.num_heads}, kernels={self.num_kernels}"


def build_scorer(ctx):
    """The scorer for one layer, or None for S = 0 (F = 0: the host attention alone)."""
    opts = ctx.options(FLAGS)
    return TisaScorer(ctx.num_heads, opts.tisa_kernels, opts.tisa_init) if opts.tisa_kernels else None


VARIANTS = {"s0": {"tisa_kernels": 0}, "s1": {"tisa_kernels": 1}, "local": {"tisa_init": "local"}}


@register_mixer("tisa", sites=("encoder_self", "decoder_self"), variants=VARIANTS)
class TisaAttention(ContentAttention):
    """Content attention with TISA's positional scores F on its logits (Eq. 4)."""

    @classmethod
    def build(cls, ctx):
        scorer = build_scorer(ctx)
        if scorer is None:  # F = 0: fairseq's attention, with its state-dict keys (those of mha)
            return ctx.build_fairseq_attention()
        if ctx.forward_context is not None:
            scorer.share_with(ctx.forward_context)
        return cls.at_site(ctx, bias=scorer)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints from before TISA moved onto content attention: it wrapped
        # fairseq's MultiheadAttention (``attention.{q,k,v,out}_proj``, the same
        # Linear layers) beside the scorer (``tisa``).
        for old, new in ((f"{prefix}attention.", prefix), (f"{prefix}tisa.", f"{prefix}position_bias.")):
            for key in [k for k in state_dict if k.startswith(old)]:
                state_dict[new + key[len(old):]] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


@register_mixer("tisa_shaw", sites=("encoder_self", "decoder_self"))
def tisa_shaw_attention(ctx):
    """Shaw et al.'s relative attention plus TISA's positional scores on its logits (Eq. 4)."""
    # S = 0 leaves the hook empty: plain Shaw attention.
    return ShawRelativeAttention.build(ctx, logit_bias=build_scorer(ctx))


# The presets (families.py): TISA in every self-attention, mode (a) beside
# the sinusoids, mode (b) instead of them (with --tisa-kernels 0: no position
# information at all but the decoder's causal mask). Cross attention stays
# MHA (no relative distance between a target and a source position). The
# paper evaluates on GLUE, not translation: the presets serve recipes/tisa/mt.sh.
_TISA = {"encoder_self_mixer": "tisa", "decoder_self_mixer": "tisa"}
families.declare(
    __name__, "translation-invariant self-attention", "tisa",
    families.Family(
        "tisa_transformer", "mode (a): TISA beside the sinusoidal (or, with `--encoder-learned-pos "
        "--decoder-learned-pos`, learned) position embeddings in every encoder and decoder self-attention", _TISA,
        {"tiny": families.TESTS, "small": "no paper table: recipes/tisa/mt.sh (small, mode a)",
         "base": "no paper table: recipes/tisa/mt.sh (base, mode a)", "big": "no paper table: the big size of mode a"},
        benchmark="mechanism",
        ctranslate2=families.OWN_PARAMETERS),
    families.Family(
        "tisa_nope_transformer", "mode (b): TISA instead of position embeddings; `tisa_nope_transformer_base "
        "--tisa-kernels 0` is the S = 0 bag-of-words baseline", {**_TISA, "no_token_positional_embeddings": True},
        {"tiny": families.TESTS, "small": "no paper table: recipes/tisa/mt.sh (small, mode b and S = 0)",
         "base": "no paper table: recipes/tisa/mt.sh (base, mode b and S = 0)",
         "big": "no paper table: the big size of mode b"},
        ctranslate2=families.NO_POSITION_EMBEDDINGS),
)
