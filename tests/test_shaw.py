"""Shaw et al. (2018) relative attention and "relative attention" (relattn):
equations vs a naive loop, parameters, the logit-bias hook, presets."""
import math

import pytest
import torch
import fairseq_testing
from fairseq_testing import build_model, decode_incrementally, parse_train_args, step_mixer

from posnet_fairseq.mixers.attention import real_positions
from posnet_fairseq.mixers.shaw import RelativeAttention, ShawRelativeAttention

D, H = 12, 3


def make(cls, embeddings="per-head", values=False, max_distance=2, causal=False, seed=0):
    torch.manual_seed(seed)
    m = cls(D, H, max_distance, embeddings, values, dropout=0.0, causal=causal).double().eval()
    # Xavier tables are small next to the content term: make the position
    # terms large enough that a wrong slot shows up clearly.
    with torch.no_grad():
        m.relative_keys.normal_(0.0, 1.0)
        if m.relative_values is not None:
            m.relative_values.normal_(0.0, 1.0)
    return m


def padded_batch(lengths, left, seed=1):
    return fairseq_testing.padded_batch(lengths, left, D, seed)


def naive(m, x, pad, bias=None):
    """Shaw Eq. 2-5 one pair at a time over the real tokens of each sentence."""
    T, B, _ = x.shape
    dh, K = m.head_dim, m.max_distance
    q, v = m.q_proj(x), m.v_proj(x)
    k = m.k_proj(x) if m.k_proj is not None else None
    z = torch.zeros(T, B, D, dtype=x.dtype)

    def row(table, h, r):
        return table[r, h * dh:(h + 1) * dh] if m.embeddings == "per-head" else table[r]

    for b in range(B):
        real = [t for t in range(T) if not pad[b, t]]
        for h in range(H):
            hs = slice(h * dh, (h + 1) * dh)
            for i, ti in enumerate(real):
                keys = [(j, tj) for j, tj in enumerate(real) if not (m.causal and j > i)]
                slots = [min(max(j - i, -K), K) + K for j, _ in keys]
                energies = []
                for (j, tj), r in zip(keys, slots):
                    key = row(m.relative_keys, h, r)
                    if k is not None:
                        key = key + k[tj, b, hs]
                    e = torch.dot(q[ti, b, hs], key) / math.sqrt(dh)
                    if bias is not None:
                        e = e + bias[h, i, j]
                    energies.append(e)
                a = torch.softmax(torch.stack(energies), dim=0)
                for n, ((j, tj), r) in enumerate(zip(keys, slots)):
                    value = v[tj, b, hs]
                    if m.relative_values is not None:
                        value = value + row(m.relative_values, h, r)
                    z[ti, b, hs] += a[n] * value
    return m.out_proj(z)


class PositionBias(torch.nn.Module):
    """A fixed H x N x N table indexed by real positions; records its inputs."""

    def __init__(self, table):
        super().__init__()
        self.table = table
        self.calls = []

    def forward(self, query_positions, key_positions):
        self.calls.append((query_positions.clone(), key_positions.clone()))
        return self.table[:, query_positions.unsqueeze(2), key_positions.unsqueeze(1)].permute(1, 0, 2, 3)


def assert_real_rows_close(out, ref, pad):
    real = ~pad.t()  # T x B
    torch.testing.assert_close(out[real], ref[real], rtol=0, atol=1e-10)


@pytest.mark.parametrize("cls", [ShawRelativeAttention, RelativeAttention], ids=["shaw", "relattn"])
@pytest.mark.parametrize("embeddings", ["per-head", "shared"])
@pytest.mark.parametrize("values", [False, True], ids=["keys", "values"])
@pytest.mark.parametrize("max_distance", [2, 16], ids=["K<len", "K>len"])
@pytest.mark.parametrize("causal,left", [(False, True), (True, False)], ids=["encoder-leftpad", "decoder-rightpad"])
def test_vectorized_equals_naive_loop(cls, embeddings, values, max_distance, causal, left):
    m = make(cls, embeddings, values, max_distance, causal)
    x, pad = padded_batch([7, 4, 1, 6], left=left)
    out, _ = m(x, x, x, key_padding_mask=pad)
    assert_real_rows_close(out, naive(m, x, pad), pad)


@pytest.mark.parametrize("cls", [ShawRelativeAttention, RelativeAttention], ids=["shaw", "relattn"])
@pytest.mark.parametrize("causal", [False, True])
def test_logit_bias_is_added_after_scaling_by_real_position(cls, causal):
    m = make(cls, "shared", True, 2, causal)
    x, pad = padded_batch([6, 3], left=True)
    table = torch.randn(H, 6, 6, generator=torch.Generator().manual_seed(3), dtype=torch.double)
    m.logit_bias = PositionBias(table)
    out, _ = m(x, x, x, key_padding_mask=pad)
    for b in range(2):
        n = int((~pad[b]).sum())
        ref = naive(m, x[:, b:b + 1], pad[b:b + 1], bias=table[:, :n, :n])
        assert_real_rows_close(out[:, b:b + 1], ref, pad[b:b + 1])
    query_pos, key_pos = m.logit_bias.calls[-1]
    torch.testing.assert_close(query_pos, real_positions(pad, 2, 6, "cpu"))
    torch.testing.assert_close(key_pos, real_positions(pad, 2, 6, "cpu"))


class DiagonalOnly(torch.nn.Module):
    """-1e4 everywhere except where the key position equals the query position."""

    def forward(self, query_positions, key_positions):
        same = query_positions.unsqueeze(2) == key_positions.unsqueeze(1)
        return torch.where(same, 0.0, -1e4).unsqueeze(1).double()


@pytest.mark.parametrize("cls", [ShawRelativeAttention, RelativeAttention], ids=["shaw", "relattn"])
def test_diagonal_logit_bias_copies_each_value(cls):
    m = make(cls, max_distance=3)
    x, pad = padded_batch([5, 2], left=True)
    copy = m.out_proj(m.v_proj(x))
    out, _ = m(x, x, x, key_padding_mask=pad)
    assert (out - copy)[~pad.t()].abs().max() > 1e-2  # without the hook it mixes
    m.logit_bias = DiagonalOnly()
    out, _ = m(x, x, x, key_padding_mask=pad)
    assert_real_rows_close(out, copy, pad)
    assert "logit_bias" in dict(m.named_children())  # a module hook is registered, hence saved and trained


@pytest.mark.parametrize("cls", [ShawRelativeAttention, RelativeAttention], ids=["shaw", "relattn"])
@pytest.mark.parametrize("embeddings", ["per-head", "shared"])
def test_incremental_decoding_equals_teacher_forcing(cls, embeddings):
    m = make(cls, embeddings, values=True, max_distance=2, causal=True)
    bias = PositionBias(torch.randn(H, 7, 7, generator=torch.Generator().manual_seed(4), dtype=torch.double))
    m.logit_bias = bias
    x, _ = padded_batch([7, 7], left=False)
    full, _ = m(x, x, x)
    steps, state = step_mixer(m, x)
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-10)
    assert len(bias.calls) == 1 + 7  # the full pass, then one call per step
    for t, (query_pos, key_pos) in enumerate(bias.calls[1:]):
        assert query_pos.tolist() == [[t], [t]] and key_pos.tolist() == [list(range(t + 1))] * 2
    buffer = m._get_input_buffer(state)
    assert ("prev_key" in buffer) == (cls is ShawRelativeAttention)  # relattn caches no keys
    assert "prev_value" in buffer and all(v.size(0) == 2 for v in buffer.values())  # batch on dim 0 for reordering


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_no_nan_in_half_precision_at_length_300(dtype, causal):
    torch.manual_seed(0)
    m = ShawRelativeAttention(32, 4, 16, "per-head", True, causal=causal).to(dtype).eval()
    x = torch.randn(300, 2, 32).mul(4).to(dtype)
    pad = torch.zeros(2, 300, dtype=torch.bool)
    pad[1, :250] = True  # a left-padded sentence of 50 tokens beside one of 300
    out, _ = m(x, x, x, key_padding_mask=pad)
    assert out.dtype == dtype and torch.isfinite(out).all()


def test_relattn_has_no_key_projection():
    shaw, rel = make(ShawRelativeAttention), make(RelativeAttention)
    assert rel.k_proj is None and not any("k_proj" in n for n, _ in rel.named_parameters())
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(shaw) - count(rel) == D * D + D
    # relattn logits do not depend on the key input, only on positions
    x, _ = padded_batch([5], left=True)
    other = torch.randn_like(x)
    torch.testing.assert_close(rel(x, x, x)[0], rel(x, other, x)[0])
    assert not torch.allclose(shaw(x, x, x)[0], shaw(x, other, x)[0])


def n_params(model):
    return sum(p.numel() for p in model.parameters())


@pytest.fixture(scope="module")
def base_counts():
    counts = {}
    for arch in ("posnet_transformer_base", "shaw_transformer_base", "relattn_transformer_base"):
        counts[arch] = n_params(build_model(arch=arch, dims=())[0])
    counts["shared"] = n_params(build_model(["--relative-embeddings", "shared"], "shaw_transformer_base", dims=())[0])
    return counts


def test_shaw_base_adds_one_relative_key_table_per_self_attention_layer(base_counts):
    # PosNet paper Table 2: 66.5M -> 66.7M, a 33 x 512 table in each of the 12 self-attention layers.
    assert base_counts["shaw_transformer_base"] - base_counts["posnet_transformer_base"] == 33 * 512 * 12 == 202752
    # Shaw's shared table is d_h = 64 wide.
    assert base_counts["shared"] - base_counts["posnet_transformer_base"] == 33 * 64 * 12
    # relattn drops W_K (512 x 512 + 512) in those 12 layers.
    assert base_counts["relattn_transformer_base"] == base_counts["shaw_transformer_base"] - 12 * (512 * 512 + 512)


@pytest.mark.parametrize("prefix,mixer", [("shaw_transformer", "shaw"), ("relattn_transformer", "relattn")])
@pytest.mark.parametrize("size,max_distance", [("tiny", 16), ("small", 16), ("base", 16), ("big", 8)])
def test_presets(prefix, mixer, size, max_distance):
    args = parse_train_args(["--arch", f"{prefix}_{size}"])
    assert (args.encoder_self_mixer, args.decoder_self_mixer, args.cross_mixer) == (mixer, mixer, "mha")
    assert args.relative_max_distance == max_distance
    assert args.no_token_positional_embeddings is True
    assert parse_train_args(["--arch", f"{prefix}_{size}", "--relative-max-distance", "4"]).relative_max_distance == 4


def test_preset_models_have_no_absolute_positions_unless_asked():
    model, _ = build_model(arch="shaw_transformer_tiny")
    assert model.encoder.embed_positions is None and model.decoder.embed_positions is None
    layer = model.decoder.layers[0]
    assert type(layer.self_attn) is ShawRelativeAttention and type(layer.encoder_attn).__name__ == "MultiheadAttention"
    assert layer.self_attn.causal and not model.encoder.layers[0].self_attn.causal
    model, _ = build_model(["--encoder-self-mixer", "shaw", "--decoder-self-mixer", "relattn"])
    assert model.encoder.embed_positions is not None
    assert type(model.decoder.layers[0].self_attn) is RelativeAttention


def test_bad_flags_fail_at_build_time():
    with pytest.raises(ValueError, match="--relative-max-distance -1"):
        build_model(["--relative-max-distance", "-1"], arch="shaw_transformer_tiny")
    with pytest.raises(ValueError, match="--cross-mixer shaw"):
        build_model(["--cross-mixer", "shaw"], arch="shaw_transformer_tiny")


def test_model_translates_the_same_with_and_without_a_longer_neighbour():
    """Left-padded source: a sentence's encoder output does not depend on its padding."""
    model, task = build_model(arch="shaw_transformer_tiny")
    d = task.source_dictionary
    long, short = [5, 6, 7, 8, 9, 10, 11], [12, 13, 14]
    tokens = torch.full((2, 8), d.pad())
    tokens[0] = torch.tensor(long + [d.eos()])
    tokens[1, 4:] = torch.tensor(short + [d.eos()])
    batched = model.encoder(tokens, src_lengths=torch.tensor([8, 4]))["encoder_out"][0]
    alone = model.encoder(tokens[1:, 4:], src_lengths=torch.tensor([4]))["encoder_out"][0]
    torch.testing.assert_close(batched[4:, 1:], alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", [ShawRelativeAttention, RelativeAttention], ids=["shaw", "relattn"])
def test_gated_mixer_equals_naive_loop_with_gated_values_and_output(cls):
    """PosNet Eq. 4 around Shaw: v' = LN(GELU(W_v x)) feeds Eq. 3, W_o sees z * GELU(W_g y)."""
    from argparse import Namespace

    from posnet_fairseq.mixers.gating import GatedMixer, gate_module

    m = make(cls, "per-head", values=True, max_distance=2, causal=True)
    gating = Namespace(gating_value_act="gelu", gating_gate_act="gelu", gating_no_value_norm=False,
                       gating_gate_norm=False)
    gated = gate_module(m, gating).double()
    assert isinstance(gated, GatedMixer) and gated.mixer is m
    x, pad = padded_batch([6, 3], left=False)
    out, _ = gated(x, x, x, key_padding_mask=pad)
    # The mixer now ends in the identity: naive() gives the heads, the wrapper gates and projects them.
    ref = gated.out_proj(naive(m, x, pad) * torch.nn.functional.gelu(gated.gate_proj(x)))
    assert_real_rows_close(out, ref, pad)


@pytest.mark.parametrize("arch", ["shaw_transformer_tiny", "relattn_transformer_tiny"])
def test_gated_presets_decode_incrementally_like_teacher_forcing(arch):
    from posnet_fairseq.mixers.gating import GatedMixer

    gate = ["--encoder-self-gating", "on", "--decoder-self-gating", "on"]
    model, task = build_model(gate + ["--relative-max-distance", "2"], arch=arch)
    plain, _ = build_model(["--relative-max-distance", "2"], arch=arch)
    for layer in list(model.encoder.layers) + list(model.decoder.layers):
        assert isinstance(layer.self_attn, GatedMixer) and isinstance(layer.self_attn.mixer, ShawRelativeAttention)
    # W_g (16 x 16 + 16) and the value LayerNorm (2 x 16) in each of the 4 self-attention layers
    assert n_params(model) - n_params(plain) == 4 * (16 * 16 + 16 + 2 * 16)
    d = task.source_dictionary
    src, lengths = torch.tensor([[5, 6, 7, 8, 9, d.eos()]]), torch.tensor([6])
    prev = torch.tensor([[d.eos(), 10, 11, 12, 13, 14, 15]])
    with torch.no_grad():
        full = model(src, lengths, prev)[0]
    torch.testing.assert_close(decode_incrementally(model, src, lengths, prev), full, rtol=0, atol=1e-5)
