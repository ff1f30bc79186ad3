"""The host of the position schemes (mixers/content_attention.py) beyond the shared mixer contract:
it is scaled dot-product attention, its hooks act where they say, and it costs what the Transformer costs."""
import math

import pytest
import torch

from fairseq_testing import assert_decodes_as_it_trains, build_model, step_mixer
from posnet_fairseq.benchmark.launches import NO_KERNEL
from posnet_fairseq.mixers.alibi import AlibiAttention
from posnet_fairseq.mixers.content_attention import ContentAttention
from posnet_fairseq.mixers.distance_bias import FOLD_START, DistanceBias
from posnet_fairseq.mixers.kerple import KerpleAttention
from posnet_fairseq.mixers.rope import RopeAttention
from posnet_fairseq.mixers.t5_bias import T5BiasAttention


def reference_attention(mixer, x, pad=None, bias=None, causal=False):
    """Vaswani et al. Eq. 1-2 written out with loops over heads: out_proj(concat_h softmax(q k^T/sqrt(d) + b) v)."""
    length, batch, dim = x.shape
    heads, d = mixer.num_heads, mixer.head_dim
    q, k, v = mixer.q_proj(x), mixer.k_proj(x), mixer.v_proj(x)
    outs = []
    for b in range(batch):
        per_head = []
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            logits = q[:, b, cols] @ k[:, b, cols].t() / math.sqrt(d)
            if bias is not None:
                logits = logits + bias[b, h]
            if pad is not None:
                logits = logits.masked_fill(pad[b].unsqueeze(0), float("-inf"))
            if causal:
                logits = logits.masked_fill(torch.ones(length, length).triu(1).bool(), float("-inf"))
            per_head.append(torch.softmax(logits, dim=-1) @ v[:, b, cols])
        outs.append(torch.cat(per_head, dim=-1))
    return mixer.out_proj(torch.stack(outs, dim=1))


class ConstantBias(DistanceBias):
    """f_h(k) = (h + 1) * k: a bias whose every entry is known."""

    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def profile(self, distances):
        return (torch.arange(self.heads).float() + 1).unsqueeze(1) * distances.float().unsqueeze(0)


@pytest.mark.parametrize("causal", [False, True])
def test_without_hooks_it_is_scaled_dot_product_attention(causal):
    torch.manual_seed(0)
    mixer = ContentAttention(16, 4, causal=causal).eval()
    x = torch.randn(7, 2, 16)
    out, _ = mixer(x, x, x)
    assert torch.allclose(out, reference_attention(mixer, x, causal=causal), atol=1e-5)


def test_the_bias_hook_is_added_to_the_scaled_logits_at_real_positions():
    torch.manual_seed(0)
    mixer = ContentAttention(16, 4, bias=ConstantBias(4)).eval()
    x = torch.randn(6, 2, 16)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, :2] = True  # left-padded source: sentence 1 starts at column 2
    out, _ = mixer(x, x, x, key_padding_mask=pad)
    bias = torch.zeros(2, 4, 6, 6)
    for b, start in ((0, 0), (1, 2)):
        for h in range(4):
            for i in range(6):
                for j in range(6):
                    bias[b, h, i, j] = (h + 1) * ((j - start) - (i - start))  # distances between real positions
    expected = reference_attention(mixer, x, pad=pad, bias=bias)
    assert torch.allclose(out[:, 0], expected[:, 0], atol=1e-5)
    assert torch.allclose(out[2:, 1], expected[2:, 1], atol=1e-5)  # pad rows are never read


@pytest.mark.parametrize("cls,flags", [(RopeAttention, []), (AlibiAttention, []), (T5BiasAttention, []),
                                       (KerpleAttention, [])])
def test_the_weights_path_is_the_fused_path(cls, flags):
    """need_weights (posnet-compare's mixing profile) computes the same output as the fused kernel."""
    name = {RopeAttention: "rope", AlibiAttention: "alibi", T5BiasAttention: "t5_bias", KerpleAttention: "kerple"}[cls]
    model, _ = build_model(["--encoder-self-mixer", name, "--decoder-self-mixer", name, *flags])
    for mixer, causal in ((model.encoder.layers[0].self_attn, False), (model.decoder.layers[1].self_attn, True)):
        assert type(mixer) is cls and mixer.causal is causal
        x = torch.randn(9, 3, mixer.embed_dim)
        pad = torch.zeros(3, 9, dtype=torch.bool)
        pad[2, :4] = True
        fused, none = mixer(x, x, x, key_padding_mask=pad)
        explicit, weights = mixer(x, x, x, key_padding_mask=pad, need_weights=True, need_head_weights=True)
        assert none is None and weights.shape == (mixer.num_heads, 3, 9, 9)
        assert torch.allclose(fused, explicit, atol=1e-5)
        assert torch.allclose(weights[:, :2].sum(-1), torch.ones(()), atol=1e-5)
        assert torch.allclose(weights[:, 2, 4:].sum(-1), torch.ones(()), atol=1e-5)  # real queries of sentence 2
        assert weights[:, 2, :, :4].abs().max() == 0  # pad keys get no weight


def parameters(model):
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_at_base_size():
    """RoPE and ALiBi add no parameters; T5 one B x H table per encoder/decoder; KERPLE 2 H per layer."""
    counts = {arch: parameters(build_model(arch=arch, dims=[])[0]) for arch in
              ("posnet_transformer_base", "rope_transformer_base", "alibi_transformer_base",
               "t5bias_transformer_base", "kerple_transformer_base", "nope_transformer_base")}
    transformer = counts["posnet_transformer_base"]
    assert counts["rope_transformer_base"] == transformer
    assert counts["alibi_transformer_base"] == transformer
    assert counts["nope_transformer_base"] == transformer
    assert counts["t5bias_transformer_base"] == transformer + 2 * 32 * 8  # shared by the 6 layers of each side
    assert counts["kerple_transformer_base"] == transformer + 12 * 2 * 8


def test_t5_table_is_shared_by_the_layers_and_saved_once():
    model, _ = build_model(["--encoder-self-mixer", "t5_bias", "--decoder-self-mixer", "t5_bias"])
    tables = {id(layer.self_attn.position_bias) for layer in model.encoder.layers}
    assert len(tables) == 1
    assert model.encoder.layers[0].self_attn.position_bias is not model.decoder.layers[0].self_attn.position_bias
    keys = [k for k in model.state_dict() if "t5_bias" in k]
    assert keys == ["encoder.mixer_shared.t5_bias_encoder_self.table.weight",
                    "decoder.mixer_shared.t5_bias_decoder_self.table.weight"]


@pytest.mark.parametrize("name", ["rope", "alibi", "t5_bias", "kerple"])
def test_cross_site_is_refused_naming_the_flag(name):
    with pytest.raises(ValueError, match=f"--cross-mixer {name}: mixer '{name}' cannot serve the cross site"):
        build_model(["--cross-mixer", name])


def test_presets_replace_the_position_embeddings():
    for scheme in ("rope", "alibi", "t5bias", "kerple", "nope"):
        model, _ = build_model(arch=f"{scheme}_transformer_tiny")
        assert model.encoder.embed_positions is None and model.decoder.embed_positions is None
        assert type(model.decoder.layers[0].encoder_attn).__name__ == "MultiheadAttention"


@pytest.mark.parametrize("explicit", [("cpu",), ()], ids=["explicit", "fused"])
def test_decoding_masks_a_pad_key_that_appears_mid_sentence(monkeypatch, explicit):
    """The cached padding mask starts with the first pad a step brings (earlier steps recorded as real); a step
    attends as the CPU does (explicit products) and as a GPU does (the fused kernel)."""
    from posnet_fairseq.mixers import content_attention

    monkeypatch.setattr(content_attention, "EXPLICIT_DECODING", explicit)
    torch.manual_seed(3)
    mixer = ContentAttention(16, 2, causal=True, bias=ConstantBias(2)).eval()
    x = torch.randn(6, 2, 16)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 3] = True
    teacher_forced, _ = mixer(x, x, x, key_padding_mask=pad)
    state, steps = {}, []
    for t in range(6):
        step_pad = pad[:, t: t + 1] if pad[:, t].any() else None
        steps.append(mixer(x[t: t + 1], x[t: t + 1], x[t: t + 1], key_padding_mask=step_pad,
                           incremental_state=state)[0])
    decoded = torch.cat(steps)
    assert torch.allclose(decoded[:, 0], teacher_forced[:, 0], atol=1e-5)
    assert torch.allclose(decoded[[0, 1, 2, 4, 5], 1], teacher_forced[[0, 1, 2, 4, 5], 1], atol=1e-5)
    assert mixer._get_input_buffer(state)["prev_key_padding_mask"].tolist() == pad.tolist()


@pytest.mark.parametrize("mixer", ["alibi", "tisa", "rope"])
def test_a_decoding_step_attends_through_the_fused_kernel_where_the_device_is_no_cpu(monkeypatch, mixer):
    """Issue 48: on a GPU (a device type not in EXPLICIT_DECODING) a decoding step's attention is the fused
    kernel, one launch (two with a bias) where the explicit products are 3-6; it decodes as it trains, one step or a block at a
    time, and returns the explicit path's output."""
    from posnet_fairseq.mixers import content_attention, fused_attention

    model, task = build_model(["--encoder-self-mixer", mixer, "--decoder-self-mixer", mixer,
                               "--no-token-positional-embeddings"])
    model.eval().make_generation_fast_()
    attention = model.decoder.layers[0].self_attn
    x = torch.randn(6, 2, attention.embed_dim)
    with torch.no_grad():
        explicit = step_mixer(attention, x)[0]
    calls = []
    monkeypatch.setattr(content_attention, "EXPLICIT_DECODING", ())
    monkeypatch.setattr(content_attention, "fused_attention", lambda *args: calls.append(1) or
                        fused_attention.fused_attention(*args))
    with torch.no_grad():
        fused = step_mixer(attention, x)[0]
        blocks = step_mixer(attention, x, block=3)[0]
    assert len(calls) == 6 + 2
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(blocks, explicit, atol=1e-5, rtol=1e-5)
    assert_decodes_as_it_trains(model, task)


def test_the_posnet_gating_wraps_a_scheme():
    """v_proj/out_proj are Linear layers: the gating (PosNet Eq. 4) wraps the scheme, and it still decodes as it trains."""
    from fairseq_testing import decode_incrementally, random_batch
    from posnet_fairseq.mixers.gating import GatedMixer

    model, task = build_model(["--encoder-self-mixer", "alibi", "--decoder-self-mixer", "rope",
                               "--encoder-self-gating", "on", "--decoder-self-gating", "on"])
    assert isinstance(model.encoder.layers[0].self_attn, GatedMixer)
    assert type(model.decoder.layers[0].self_attn.mixer) is RopeAttention
    src, lengths, prev = random_batch(task.source_dictionary, [7, 4], [6, 3])
    with torch.no_grad():
        out = model(src, lengths, prev)[0]
    assert torch.allclose(decode_incrementally(model, src, lengths, prev)[0], out[0], atol=1e-5)


def test_a_folded_decoding_row_is_the_profile_also_past_the_first_table():
    """After make_generation_fast_, a decoding step's bias row comes from a table that doubles as the prefix grows,
    and that follows the parameters (derived_cache.py): an in-place write after the first step makes it anew."""
    from posnet_fairseq.mixers.distance_bias import FOLD_START
    from posnet_fairseq.mixers.tisa import TisaScorer

    torch.manual_seed(0)
    scorer = TisaScorer(4, 3).eval()
    scorer.make_generation_fast_()

    def profile_row(reach):
        return scorer.profile(torch.arange(1 - reach, 1))[None, :, None, :]

    for reach in (1, 5, FOLD_START, FOLD_START + 1, 3 * FOLD_START):
        assert torch.allclose(scorer.decoding_row(reach, "cpu"), profile_row(reach), atol=1e-6, rtol=1e-6)
    # doubled twice: 129 needed 2 N, 3 N needed 4 N (4 heads of fp32)
    assert scorer.decoding_row(3 * FOLD_START, "cpu").untyped_storage().nbytes() == 4 * 4 * FOLD_START * 4
    assert scorer.decoding_table(5, "cpu") is scorer.decoding_table(7, "cpu")  # made once, a step's row its view
    with torch.no_grad():
        scorer.amplitudes.mul_(2)  # as load_state_dict writes a checkpoint into the parameters
    assert torch.allclose(scorer.decoding_row(5, "cpu"), profile_row(5), atol=1e-6, rtol=1e-6)
    scorer.train()  # a training-mode row is computed from the parameters, not read from the table
    with torch.no_grad():
        scorer.amplitudes.mul_(2)
    assert torch.allclose(scorer.decoding_row(5, "cpu"), profile_row(5))


@pytest.mark.parametrize("mixer", ["alibi", "tisa"])
def test_a_search_reads_its_bias_rows_from_the_folded_table_it_looked_up_once(monkeypatch, mixer):
    """A decoding step's bias row is a view of the table the search's state refers to: no lookup of the
    parameters at every step; a new search after a load looks up the new table."""
    from posnet_fairseq.mixers.content_attention import BIAS_TABLE

    model, _ = build_model(["--encoder-self-mixer", mixer, "--decoder-self-mixer", mixer,
                            "--no-token-positional-embeddings"])
    model.eval().make_generation_fast_()
    attention = model.decoder.layers[0].self_attn
    bias = attention.position_bias
    x = torch.randn(6, 2, attention.embed_dim)
    expected, _ = attention(x, x, x, attn_mask=model.decoder.buffered_future_mask(x))
    with torch.no_grad():
        out, state = step_mixer(attention, x)
    table = attention._get_input_buffer(state)[BIAS_TABLE]
    assert table is bias.decoding_table(6, x.device)
    torch.testing.assert_close(out, expected.detach(), atol=1e-5, rtol=1e-5)
    lookups = []
    looked_up = bias.decoding_table
    with monkeypatch.context() as patch:
        patch.setattr(bias, "decoding_table", lambda *args: lookups.append(args) or looked_up(*args))
        with torch.no_grad():
            step_mixer(attention, x)
    assert lookups == [(1, torch.device("cpu"))]  # at the first step only
    if mixer == "tisa":
        with torch.no_grad():
            bias.amplitudes.mul_(2)  # as load_state_dict writes a checkpoint into the parameters
            _, state = step_mixer(attention, x)
        assert attention._get_input_buffer(state)[BIAS_TABLE] is not table


def test_the_forward_context_makes_a_shared_value_once_per_call_and_anchor():
    from posnet_fairseq.mixers.forward_context import ForwardContext

    context, made = ForwardContext(), []

    def make():
        made.append(1)
        return len(made)

    pad, other = torch.zeros(2, 3, dtype=torch.bool), torch.zeros(2, 3, dtype=torch.bool)
    assert [context.shared("k", make), context.shared("k", make)] == [1, 2]  # outside a call: made every time
    with context.call():
        assert [context.shared("k", make, pad), context.shared("k", make, pad)] == [3, 3]
        assert context.shared("k", make, other) == 4  # another mask: made again
    with context.call():
        assert context.shared("k", make, other) == 5  # a new call forgets the last one's values


@pytest.mark.parametrize("scheme", ["alibi", "tisa", "rope", "t5_bias"])
def test_a_model_computes_its_position_grids_once_per_call(scheme):
    """Every layer of a side reads the same positions, masks, rotation and (for ALiBi and T5) bias, made once;
    the layers' output is that of layers computing their own (no forward context)."""
    torch.manual_seed(0)
    model, task = build_model(["--encoder-self-mixer", scheme, "--decoder-self-mixer", scheme,
                               "--no-token-positional-embeddings"])
    model.eval()
    src = torch.tensor([[1, 5, 6, 7, 2], [1, 1, 8, 9, 2]])  # the second sentence left-padded (pad = 1)
    encoder = model.encoder
    makes = []
    shared = encoder.forward_context.shared

    def counting(key, make, anchor=None):
        return shared(key, lambda: makes.append(key[0]) or make(), anchor)

    encoder.forward_context.shared = counting
    out = encoder(src, torch.tensor([5, 4]))["encoder_out"][0]
    assert makes and len(makes) == len(set(makes))  # each grid made once, for both layers
    for layer in encoder.layers:
        layer.self_attn.forward_context = None
    assert torch.allclose(encoder(src, torch.tensor([5, 4]))["encoder_out"][0], out, atol=1e-6)


def test_a_decoding_step_reads_its_rotation_from_a_table_and_decodes_as_it_trains():
    """Every sentence of a step is at the same position: RoPE's rotation is a view of a table of the steps, made
    at the first step (one per layer), and no step computes one."""
    from fairseq_testing import decode_incrementally

    torch.manual_seed(0)
    model, _ = build_model(["--encoder-self-mixer", "rope", "--decoder-self-mixer", "rope",
                            "--no-token-positional-embeddings"])
    model.eval()
    context = model.decoder.forward_context
    makes, shared = [], context.shared
    context.shared = lambda key, make, anchor=None: shared(key, lambda: makes.append(key[0]) or make(), anchor)
    src, lengths = torch.tensor([[5, 6, 7, 2], [8, 9, 10, 2]]), torch.tensor([4, 4])
    prev = torch.tensor([[2, 5, 9, 7, 6], [2, 8, 8, 4, 5]])
    decoded = decode_incrementally(model, src, lengths, prev)
    assert len(model.decoder.layers) == 2 and makes.count("rotation") == 0
    for layer in model.decoder.layers:
        table = layer.self_attn.transform.decoding_table
        assert table.shape == (FOLD_START, 1, 8, 8)  # steps x every sentence x d_h x d_h
    with torch.no_grad():
        assert torch.allclose(decoded, model(src, lengths, prev)[0], atol=1e-5)


def launching_ops(monkeypatch, arch):
    """Kernel-launching operators of one beam-search decoding step of ``arch`` (op_counts' step, fp32 CPU):
    the innermost operators that are no view, allocation or no-op."""
    from posnet_fairseq.benchmark import op_counts

    def counted(profiler, device):
        def launches(event):
            return event.name.startswith("aten::") and event.name not in NO_KERNEL

        def below(event):
            return any(launches(child) or below(child) for child in event.cpu_children)
        return sum(1 for event in profiler.events() if launches(event) and not below(event))

    monkeypatch.setattr(op_counts, "counted", counted)
    args = op_counts.parse_args(["--size", "tiny", "--vocab", "64", "--batch-size", "2", "--source-length", "8",
                                 "--step", "4"])
    return op_counts.decoding_step_ops(arch, args)


def test_a_decoding_step_of_a_position_scheme_launches_two_fewer_per_layer_than_the_transformers(monkeypatch):
    # Every hypothesis decodes the same step, counted on the host: no step state to reorder and advance, no
    # key positions; the one-query bias row and RoPE's rotation are views of tables of the steps; q, k and v
    # are one product (ContentAttention._step_projections), two operators fewer per layer. (On 86b3aaa, at
    # tiny size: ALiBi 117, TISA 125, RoPE 124 against the Transformer's 113; on 80a7eae 113, 121, 116
    # against 121; now 107, 115, 110.)
    transformer = launching_ops(monkeypatch, "posnet_transformer_tiny")
    layers = 3  # the tiny decoder's
    for arch in ("alibi_transformer_tiny", "tisa_transformer_tiny", "rope_transformer_tiny"):
        assert launching_ops(monkeypatch, arch) <= transformer - 2 * layers, arch


@pytest.mark.parametrize("mixer", ["alibi", "rope", "tisa"])
def test_a_decoding_step_without_gradients_projects_once_and_decodes_as_with_them(mixer):
    """The joined projections (kept in the search's state, not reordered) give the separate ones' output."""
    from posnet_fairseq.mixers.content_attention import JOINED

    model, _ = build_model(["--encoder-self-mixer", mixer, "--decoder-self-mixer", mixer,
                            "--no-token-positional-embeddings"])
    attention = model.decoder.layers[0].self_attn.eval()
    x = torch.randn(5, 3, attention.embed_dim)
    with torch.no_grad():
        joined, state = step_mixer(attention, x)
    separate, _ = step_mixer(attention, x)
    buffer = attention._get_input_buffer(state)
    assert buffer[JOINED].shape == (3, attention.embed_dim, attention.embed_dim)
    torch.testing.assert_close(joined, separate.detach(), atol=1e-6, rtol=1e-5)


def joined_step(attention, x):
    """A no-gradient search over ``x`` on ``attention``: its output and its state's joined weights."""
    from posnet_fairseq.mixers.content_attention import JOINED, JOINED_BIAS

    with torch.no_grad():
        out, state = step_mixer(attention, x)
    buffer = attention._get_input_buffer(state)
    return out, buffer[JOINED], buffer[JOINED_BIAS]


def test_the_joined_projections_are_made_once_per_model_not_per_search():
    model, _ = build_model(["--decoder-self-mixer", "alibi", "--no-token-positional-embeddings"])
    attention = model.decoder.layers[0].self_attn.eval()
    x = torch.randn(4, 2, attention.embed_dim)
    _, weights, biases = joined_step(attention, x)
    _, again, biases_again = joined_step(attention, x[:2])  # another search: no copy of its own
    assert again is weights and biases_again is biases


@pytest.mark.parametrize("change", ["load", "training step"])
def test_the_joined_projections_follow_a_change_of_the_parameters(change):
    """A load copies into the parameters in place, an optimizer step too: a search after it projects with the
    new weights, as the separate projections do."""
    model, _ = build_model(["--decoder-self-mixer", "rope", "--no-token-positional-embeddings"])
    attention = model.decoder.layers[0].self_attn.eval()
    x = torch.randn(4, 2, attention.embed_dim)
    _, before, _ = joined_step(attention, x)
    if change == "load":
        state = {name: torch.randn_like(tensor) for name, tensor in attention.state_dict().items()}
        attention.load_state_dict(state)
    else:
        optimizer = torch.optim.SGD(attention.parameters(), lr=0.1)
        attention(x, x, x)[0].pow(2).sum().backward()
        optimizer.step()
    out, after, biases = joined_step(attention, x)
    assert after is not before
    projections = (attention.q_proj, attention.k_proj, attention.v_proj)
    torch.testing.assert_close(after, torch.stack([p.weight.t() for p in projections]), atol=0, rtol=0)
    torch.testing.assert_close(biases, torch.stack([p.bias for p in projections]).unsqueeze(1), atol=0, rtol=0)
    torch.testing.assert_close(out, step_mixer(attention, x)[0].detach(), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_a_learned_bias_gets_the_gradient_of_its_masked_cast(monkeypatch, causal):
    # MaskedBias's gradient skips autograd's masking of it: attention gives a -inf logit no gradient.
    from posnet_fairseq.mixers import fused_attention
    from posnet_fairseq.mixers.tisa import TisaAttention, TisaScorer

    torch.manual_seed(0)
    mixer = TisaAttention(16, 2, causal=causal, bias=TisaScorer(2, 3))
    x = torch.randn(5, 3, 16)
    pad = torch.zeros(3, 5, dtype=torch.bool)
    pad[0, 3:] = pad[1, :2] = True

    def gradients():
        mixer.zero_grad()
        mixer(x, x, x, key_padding_mask=pad)[0].pow(2).sum().backward()
        return [p.grad.clone() for p in mixer.position_bias.parameters()]

    fused = gradients()
    monkeypatch.setattr(fused_attention.MaskedBias, "apply",
                        lambda bias, invalid, dtype, batch=1: bias.masked_fill(invalid, float("-inf")).to(dtype))
    for got, expected in zip(fused, gradients()):
        assert expected.abs().min() > 0
        torch.testing.assert_close(got, expected)
