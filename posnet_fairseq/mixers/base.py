"""The mixer contract and the helpers every mixer shares.

A *mixer* is a drop-in replacement for fairseq's ``MultiheadAttention`` at one
attention site of the Transformer:

* ``encoder_self``  -- encoder self-attention (source left-padded by fairseq),
* ``decoder_self``  -- causal decoder self-attention (target right-padded),
* ``cross``         -- decoder -> encoder attention (``static_kv=True``).

fairseq's layers call ``mixer(query, key, value, key_padding_mask,
incremental_state, need_weights, static_kv, attn_mask, ...)`` with T x B x C
tensors and expect ``(output, attention_or_None)``; the decoder layer also reads
``num_heads``/``head_dim`` and calls ``_get_input_buffer`` unconditionally, and
beam search calls ``reorder_incremental_state``. :class:`Mixer` provides all of
that; a concrete mixer implements ``forward`` and ``build``.

What every mixer guarantees (and ``tests/test_mixer_contract.py`` checks for
every registered mixer at every site it claims):

* positions come from the padding mask (:func:`real_positions`), never from the
  column index, so a sentence gives the same output alone or batched;
* every cached tensor has the batch on dim 0, so one ``index_select`` in
  :meth:`Mixer.reorder_incremental_state` follows beam search;
* step-by-step decoding equals the teacher-forced pass;
* no NaN/inf in fp32/bf16/fp16 up to :meth:`Mixer.max_positions`.

Mixers know nothing of fairseq's layers: the model hands them a
:class:`MixerContext` describing the site.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from torch import Tensor, nn

from ..sites import SITE, SITES



@dataclass
class MixerContext:
    """Everything a mixer may know about where it sits.

    ``args`` is the model configuration (fairseq's TransformerConfig; plugin
    flags are readable as attributes, e.g. ``args.rposnet_max_relative``).
    ``shared`` holds modules shared by all layers of one encoder/decoder (e.g.
    the position-query LayerNorm of rPosNet), registered once on that
    encoder/decoder. ``build_fairseq_attention`` builds exactly the
    MultiheadAttention fairseq would build at this site.
    """

    site: str
    embed_dim: int
    num_heads: int
    kdim: int
    layer_idx: int
    num_layers: int
    args: object
    padding_idx: int
    embed_positions: Optional[nn.Module] = None
    shared: Optional[nn.ModuleDict] = None
    build_fairseq_attention: Optional[Callable[[], nn.Module]] = None

    @property
    def dropout(self) -> float:
        return getattr(self.args, "attention_dropout", 0.0)

    @property
    def causal(self) -> bool:
        return SITE[self.site].causal

    def shared_module(self, key: str, factory: Callable[[], nn.Module]) -> nn.Module:
        """One module per encoder/decoder, created by the first layer asking for it."""
        if key not in self.shared:
            self.shared[key] = factory()
        return self.shared[key]


@dataclass
class MixerEntry:
    name: str
    build: Callable[[MixerContext], nn.Module]
    sites: frozenset
    # Named option sets the contract tests run in addition to the defaults,
    # e.g. {"far": {"aan_patterns": "far"}}: a new pattern is covered by adding
    # it here, next to the mixer.
    variants: Dict[str, dict] = field(default_factory=dict)
    uses_length_ratio: bool = False
    doc: str = ""


MIXERS: Dict[str, MixerEntry] = {}

# Site-level wrappers applied to every mixer the model builds, in registration
# order: ``wrapper(module, ctx) -> module`` returns the module unchanged when
# its flags are off for ``ctx.site`` (e.g. the PosNet GeLU gating).
SITE_WRAPPERS: List[Callable[[nn.Module, "MixerContext"], nn.Module]] = []


def register_mixer(name, sites, variants=None, uses_length_ratio=False):
    """Class decorator: ``cls.build(ctx)`` makes the module for one site."""
    bad = set(sites) - set(SITES)
    if bad:
        raise ValueError(f"mixer {name!r}: unknown sites {sorted(bad)}; sites are {SITES}")

    def decorate(cls):
        if name in MIXERS:
            raise ValueError(f"mixer {name!r} is registered twice")
        doc = (cls.__doc__ or "").strip().splitlines()
        MIXERS[name] = MixerEntry(
            name, cls.build, frozenset(sites), dict(variants or {}), uses_length_ratio, doc[0] if doc else ""
        )
        return cls

    return decorate


def register_site_wrapper(wrapper):
    SITE_WRAPPERS.append(wrapper)
    return wrapper


def build_site_mixer(name: str, ctx: MixerContext) -> nn.Module:
    """Builds mixer ``name`` for ``ctx.site`` and applies the site wrappers."""
    module = MIXERS[name].build(ctx)
    for wrapper in SITE_WRAPPERS:
        module = wrapper(module, ctx)
    return module


def mixers_for_site(site: str):
    return sorted(n for n, e in MIXERS.items() if site in e.sites)


def lookup_mixer(name: str, site: str) -> MixerEntry:
    flag = SITE[site].mixer_flag
    if name not in MIXERS:
        raise ValueError(f"{flag} {name}: unknown mixer; choose from {', '.join(mixers_for_site(site))}")
    entry = MIXERS[name]
    if site not in entry.sites:
        raise ValueError(
            f"{flag} {name}: mixer {name!r} cannot serve the {site} site (it serves "
            f"{', '.join(sorted(entry.sites))}); choose from {', '.join(mixers_for_site(site))}"
        )
    return entry


def autocast_off(tensor: Tensor):
    """A context in which arithmetic on ``tensor``'s device runs in the dtypes it is given.

    Under ``--amp`` (autocast) F.linear, matmul and einsum run in fp16/bf16
    even on fp32 inputs; the parts whose numerics need fp32 (position energy
    tables, AAN+'s WET log-weights) run inside this context.
    """
    return torch.autocast(device_type=tensor.device.type, enabled=False)


def real_positions(padding_mask: Optional[Tensor], batch: int, length: int, device) -> Tensor:
    """0-based per-sentence positions, B x T, from a B x T padding mask (True = pad).

    fairseq left-pads sources and right-pads targets; either way the first real
    token gets position 0. Pad columns get position 0 too (they are masked).
    """
    if padding_mask is None:
        return torch.arange(length, device=device).unsqueeze(0).expand(batch, length)
    real = (~padding_mask).long()
    return ((torch.cumsum(real, dim=1) - 1) * real).clamp_(min=0)


def masked_softmax(logits: Tensor, invalid: Optional[Tensor]) -> Tensor:
    """Softmax over the last dim with ``invalid`` (bool, broadcastable) keys excluded.

    A row without any valid key (only a pad query can have one) would be NaN
    after -inf masking: it sees everything, then its weights are zeroed.
    """
    if invalid is None:
        return torch.softmax(logits, dim=-1)
    empty = invalid.all(dim=-1, keepdim=True)
    probs = torch.softmax(logits.masked_fill(invalid & ~empty, float("-inf")), dim=-1)
    return probs.masked_fill(empty, 0.0)


# LayerNorm conventions a flag can choose (``--gating-norm``, ``--posnet-position-norm``):
# torch's nn.LayerNorm, or the one of the AppTek PosNet code.
LAYER_NORMS = ("torch", "apptek")


class AppTekLayerNorm(nn.LayerNorm):
    """The LayerNorm of the AppTek PosNet code (``pytorchmt`` ``LayerNormalization``).

    ``(x - mean) / sqrt(var + 1e-8) * weight + bias`` with the *unbiased*
    variance (divided by D - 1), where nn.LayerNorm divides by D and adds
    1e-5. Same parameters (and state-dict keys) as nn.LayerNorm; computed in
    fp32 and cast back to the input's dtype.
    """

    def __init__(self, dim: int):
        super().__init__(dim, eps=1e-8)

    def forward(self, x: Tensor) -> Tensor:
        y = x.float()
        y = (y - y.mean(dim=-1, keepdim=True)) / torch.sqrt(y.var(dim=-1, keepdim=True, unbiased=True) + self.eps)
        return (y * self.weight.float() + self.bias.float()).to(x.dtype)


def layer_norm(kind: str, dim: int, flag: str) -> nn.LayerNorm:
    """A LayerNorm of convention ``kind`` (one of LAYER_NORMS, given by ``flag``)."""
    if kind == "torch":
        return nn.LayerNorm(dim)
    if kind == "apptek":
        return AppTekLayerNorm(dim)
    raise ValueError(f"{flag} {kind}: choose from {', '.join(LAYER_NORMS)}")


def layer_norm_fp32(norm: nn.LayerNorm, x: Tensor) -> Tensor:
    """``norm`` applied to ``x`` in fp32, whatever the dtype of its parameters."""
    if isinstance(norm, AppTekLayerNorm):  # computes in fp32 already
        return norm(x.float())
    return F.layer_norm(x.float(), norm.normalized_shape, norm.weight.float(), norm.bias.float(), norm.eps)


def sentence_lengths(padding_mask: Optional[Tensor], batch: int, length: int, device) -> Tensor:
    if padding_mask is None:
        return torch.full((batch,), length, device=device, dtype=torch.long)
    return (~padding_mask).long().sum(dim=1)


class Mixer(FairseqIncrementalState, nn.Module):
    """Base class: fairseq's attention call contract and incremental-state plumbing.

    Subclasses implement ``forward`` with MultiheadAttention's signature and
    store their decoding state with :meth:`_set_input_buffer` as a dict of
    tensors whose dim 0 is the (beam-expanded) batch.
    """

    STATE_KEY = "mixer_state"

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by the number of heads {num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads

    @classmethod
    def build(cls, ctx: MixerContext) -> "Mixer":
        raise NotImplementedError(f"{cls.__name__} must implement build(ctx)")

    def max_positions(self) -> Optional[int]:
        """Longest sequence this mixer accepts (None: no limit)."""
        return None

    def _get_input_buffer(self, incremental_state) -> Dict[str, Optional[Tensor]]:
        return self.get_incremental_state(incremental_state, self.STATE_KEY) or {}

    def _set_input_buffer(self, incremental_state, buffer: Dict[str, Optional[Tensor]]):
        return self.set_incremental_state(incremental_state, self.STATE_KEY, buffer)

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        buffer = self._get_input_buffer(incremental_state)
        if buffer:
            reordered = {k: None if v is None else v.index_select(0, new_order) for k, v in buffer.items()}
            self._set_input_buffer(incremental_state, reordered)
        return incremental_state

    def decoding_steps(self, buffer: Dict[str, Optional[Tensor]], batch: int, length: int, device) -> Tensor:
        """Absolute 0-based target positions (B x length) of the current query block.

        During incremental decoding the number of tokens already seen is kept
        in ``buffer["steps"]`` (B x 1) and advanced here; the caller stores
        ``buffer`` back with :meth:`_set_input_buffer`.
        """
        start = buffer.get("steps")
        if start is None:
            start = torch.zeros(batch, 1, dtype=torch.long, device=device)
        positions = start + torch.arange(length, device=device).unsqueeze(0)
        buffer["steps"] = start + length
        return positions

    # ----- plumbing shared by the attention-like mixers (multi-head values, B x H x T x S weights) -----

    def split_heads(self, x: Tensor) -> Tensor:
        """T x B x D -> B x H x T x D_h.

        Batch first, so a decoding cache of these tensors follows beam search
        through :meth:`reorder_incremental_state`, and time on dim 2, so steps
        append with one ``cat``.
        """
        length, batch, _ = x.shape
        return x.view(length, batch, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def merge_heads(self, out: Tensor) -> Tensor:
        """B x H x T x D_h -> T x B x D, then ``self.out_proj``.

        The inverse of :meth:`split_heads`; ``out_proj`` is looked up at call
        time because site wrappers (the PosNet gating) may replace it.
        """
        batch, _, length, _ = out.shape
        return self.out_proj(out.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim))

    def cache_self_attention(self, incremental_state, buffer: Dict[str, Optional[Tensor]], pad: Optional[Tensor],
                             pad_key: Optional[str] = "prev_key_padding_mask", **tensors: Optional[Tensor]):
        """Appends this step to the self-attention decoding cache and stores the buffer.

        ``tensors`` (B x H x T x D_h, from :meth:`split_heads`) are keyed by
        their buffer key (e.g. ``prev_value=v``); each is appended on the time
        dim to what ``buffer`` holds under that key. A None tensor is neither
        cached nor returned changed (``relattn`` has no keys). Unless
        ``pad_key`` is None, the B x T padding mask ``pad`` (all False when
        None) is appended under ``pad_key`` too, so past pad steps stay masked.

        Returns ``(*tensors, pad, key_positions)``: the whole cache and the key
        positions 0..S-1 (B x S). The decoder's targets are right-padded, so
        a cached column index is the key's real position.
        """
        first = next(t for t in tensors.values() if t is not None)
        batch, length, device = first.size(0), first.size(2), first.device
        cached = []
        for name, tensor in tensors.items():
            if tensor is not None:
                if name in buffer:
                    tensor = torch.cat([buffer[name], tensor], dim=2)
                buffer[name] = tensor
            cached.append(tensor)
        if pad_key is not None:
            if pad is None:
                pad = torch.zeros(batch, length, dtype=torch.bool, device=device)
            if pad_key in buffer:
                pad = torch.cat([buffer[pad_key], pad], dim=1)
            buffer[pad_key] = pad
        self._set_input_buffer(incremental_state, buffer)
        keys = next(t for t in cached if t is not None).size(2)
        return (*cached, pad, torch.arange(keys, device=device).unsqueeze(0).expand(batch, keys))

    def self_attention_positions(self, incremental_state, pad: Optional[Tensor],
                                 pad_key: Optional[str] = "prev_key_padding_mask", **tensors: Optional[Tensor]):
        """Query and key positions of a self-attention call, through the decoding cache when decoding.

        Teacher-forced, queries are the keys and both take their real
        positions from ``pad``; decoding, the queries are the decoding steps
        and ``tensors``/``pad`` go through :meth:`cache_self_attention`.
        Returns ``(*tensors, pad, query_positions, key_positions)``.
        """
        first = next(t for t in tensors.values() if t is not None)
        batch, length, device = first.size(0), first.size(2), first.device
        if incremental_state is None:
            positions = real_positions(pad, batch, length, device)
            return (*tensors.values(), pad, positions, positions)
        buffer = self._get_input_buffer(incremental_state)
        query_pos = self.decoding_steps(buffer, batch, length, device)
        *cached, pad, key_pos = self.cache_self_attention(incremental_state, buffer, pad, pad_key, **tensors)
        return (*cached, pad, query_pos, key_pos)

    def clipped_decoding_step(self, buffer: Dict[str, Optional[Tensor]], step: int, v: Tensor, pad: Optional[Tensor],
                              energy: Tensor, shared_tail: bool, dropout: float = 0.0) -> Tensor:
        """One causal decoding step of softmax attention with clipped relative energies, in constant state.

        The energy of the key at distance ``n - m = j`` from the query ``n``
        (= ``step``, the same for the whole batch) may depend on ``j`` only
        through ``min(j, K)``; ``energy`` (fp32, (B or 1) x H x (K+1)) gives
        it oldest first: entry ``K - j`` is the energy at distance j < K,
        entry 0 that of every key at distance >= K (the *tail*). With
        ``shared_tail`` False the tail is the one key at distance exactly K
        (keys further away are not seen). The keys of one energy enter the
        softmax as one term ``e + log(count)`` carrying their mean value, so
        the step is the same function as attending over the whole prefix, at
        O(K D_h) per step (docs/constant-cost-decoding.md).

        ``v`` is this step's B x H x 1 x D_h value and ``pad`` (B x 1) says
        whether it is a pad key. ``buffer`` holds the state, batch first so
        that :meth:`reorder_incremental_state` follows beam search, and of a
        size that does not depend on the step: ``window`` (B x H x K x D_h, a
        ring: position m in slot m mod K, written in place), ``window_pad``
        (B x K, True where that position is a pad or before the start),
        ``tail`` (B x H x 1 x D_h, fp32: the sum of the tail's valid values)
        and ``tail_count`` (B x 1, fp32). Returns the B x H x 1 x D_h output
        before ``merge_heads``; attention dropout (training only) drops the
        tail as one term.
        """
        batch, heads, _, head_dim = v.shape
        acc = torch.promote_types(v.dtype, torch.float32)
        k = energy.size(-1) - 1
        if "window" not in buffer:
            buffer["window"] = v.new_zeros(batch, heads, k, head_dim)
            buffer["window_pad"] = torch.ones(batch, k, dtype=torch.bool, device=v.device)
            buffer["tail"] = torch.zeros(batch, heads, 1, head_dim, dtype=acc, device=v.device)
            buffer["tail_count"] = torch.zeros(batch, 1, dtype=acc, device=v.device)
        if pad is None:
            pad = torch.zeros(batch, 1, dtype=torch.bool, device=v.device)
        window, window_pad = buffer["window"], buffer["window_pad"]
        # The key now at distance K joins the tail (or, unshared, is the tail):
        # position n-K, in the slot that this step's value overwrites.
        slot = step % k if k else 0
        entering, entering_pad = (window[:, :, slot: slot + 1], window_pad[:, slot: slot + 1]) if k else (v, pad)
        entering = entering.to(acc).masked_fill(entering_pad[:, :, None, None], 0.0)
        valid = (~entering_pad).to(acc)
        count = buffer["tail_count"] + valid if shared_tail else valid
        buffer["tail"] = buffer["tail"] + entering if shared_tail else entering
        buffer["tail_count"] = count
        if k:
            window[:, :, slot: slot + 1] = v
            window_pad[:, slot: slot + 1] = pad

        # Slot i holds distance (slot - i) mod K: its energy is entry K - that.
        order = torch.tensor([0] + [k - (slot - i) % k for i in range(k)], device=v.device)  # tail, then slots
        # log(count) on the tail's energy; -inf (log 0) where the tail or a slot holds no key.
        no_key = torch.zeros(batch, k, dtype=acc, device=v.device).masked_fill_(window_pad, float("-inf"))
        bias = torch.cat([torch.log(count), no_key], dim=1).unsqueeze(1)  # B x 1 x (K+1)
        probs = torch.softmax(energy[:, :, order] + bias, dim=-1)
        # Before any real key (pads only) the row is 0, not NaN, as masked_softmax makes it.
        probs = probs.masked_fill(((count == 0) & window_pad.all(dim=1, keepdim=True)).unsqueeze(-1), 0.0)
        probs = F.dropout(probs, p=dropout, training=self.training)
        mean = buffer["tail"] / count.clamp(min=1.0).view(batch, 1, 1, 1)
        recent = torch.matmul(probs[:, :, None, 1:].to(v.dtype), window)
        return (probs[:, :, None, :1] * mean + recent.to(acc)).to(v.dtype)

    @staticmethod
    def fairseq_weights(probs: Tensor, dtype, need_weights: bool, need_head_weights: bool) -> Optional[Tensor]:
        """The attention weights as fairseq's MultiheadAttention returns them, or None.

        ``probs`` is B x H x T x S; fairseq returns H x B x T x S with
        ``need_head_weights``, else the mean over heads (B x T x S), in the
        model's ``dtype``, and None when neither is asked for.
        """
        if not (need_weights or need_head_weights):
            return None
        weights = probs.to(dtype).transpose(0, 1)
        return weights if need_head_weights else weights.mean(dim=0)
