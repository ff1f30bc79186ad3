"""posnet_fairseq.benchmark.flops: the counter against hand counts of three decoder self-attention mixers
(mha, rposnet, aan), teacher-forced and step by step, and the per-generated-token count of a whole model."""
import pytest
import torch
from fairseq_testing import TINY_DIMS, build_model

from posnet_fairseq.benchmark import flops, training_step

D = int(TINY_DIMS[TINY_DIMS.index("--decoder-embed-dim") + 1])
DECODER_LAYERS = int(TINY_DIMS[TINY_DIMS.index("--decoder-layers") + 1])
K = 4  # rPosNet's clipping distance, below the decoded length
T, B = 7, 3

# Multiply-adds count 2 FLOPs. Per token of a T-token teacher-forced pass and per row at decoding step n
# (n keys seen, the current one included), for d = D:
HAND = {
    # q, k, v and output projections (4 d^2 multiply-adds), then the scores and the weighted sum over
    # all T keys (the causal mask hides, but does not skip, the future: T, not n) or the n cached keys.
    "mha": ("posnet_transformer_tiny", [], lambda: 8 * D * D + 4 * T * D, lambda n: 8 * D * D + 4 * n * D),
    # Gated rPosNet (Eq. 4): W_v, the gate W_g and W_o (3 d^2); the energies are folded into a table
    # (no products), so only the weighted sum of the values remains: over T keys teacher-forced; while
    # decoding, one weighted embedding_bag (indexed_ring.py) reads the last K + 1 values and the tail's sum
    # with weights made once per table (K + 2 rows), and the tail's sum with the value now at distance K
    # (2 rows, the next tail's sum): K + 4 multiply-adds per element.
    "rposnet": ("rposnet_transformer_tiny", ["--posnet-max-relative", str(K)],
                lambda: 6 * D * D + 2 * T * D, lambda n: 6 * D * D + 2 * (K + 4) * D),
    # AAN+ AVG: the gate Linear(2d, 2d) (4 d^2); the averages are running (cumulative) sums, element-wise.
    "aan": ("aan_plus_avg_tiny", [], lambda: 8 * D * D, lambda n: 8 * D * D),
}


def _decoder_self_attention(arch, flags):
    model, _ = build_model(flags, arch=arch)
    model.make_generation_fast_()  # as fairseq-generate does: rPosNet's energies folded
    return model.decoder.layers[0].self_attn


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "fused"])  # fused: torch's CPU kernel
@pytest.mark.parametrize("name", sorted(HAND))
def test_counter_equals_the_hand_count_teacher_forced(name, need_weights):
    arch, flags, per_token, _ = HAND[name]
    mixer = _decoder_self_attention(arch, flags)
    x = torch.randn(T, B, D, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        counted, _ = flops.count(mixer, x, x, x, need_weights=need_weights)
    assert counted == T * B * per_token()


@pytest.mark.parametrize("name", sorted(HAND))
def test_counter_equals_the_hand_count_step_by_step(name):
    arch, flags, _, per_step = HAND[name]
    mixer = _decoder_self_attention(arch, flags)
    x = torch.randn(T, B, D, generator=torch.Generator().manual_seed(0))
    state, counted = {}, []
    with torch.no_grad():
        for n in range(1, T + 1):
            token = x[n - 1: n]
            counted.append(flops.count(mixer, token, token, token, incremental_state=state)[0])
    assert counted == [B * per_step(n) for n in range(1, T + 1)]


def test_decoding_flops_differ_by_the_decoder_self_attention_alone():
    """The Transformer and AAN+ AVG differ only in decoder self-attention; per generated token of beam
    search, the difference is every layer's and beam row's scores and weighted sums (4 n d at step n)
    averaged over the steps."""
    source, steps, beam = 9, 12, 3
    transformer = flops.decoding_flops(build_model(arch="posnet_transformer_tiny")[0], source, [steps], beam)[steps]
    aan = flops.decoding_flops(build_model(arch="aan_plus_avg_tiny")[0], source, [steps], beam)[steps]
    attention = DECODER_LAYERS * beam * sum(4 * n * D for n in range(1, steps + 1)) / steps
    assert transformer - aan == pytest.approx(attention, rel=1e-12)
    assert flops.ceiling(aan, transformer) == transformer / aan > 1


def test_decoding_cost_per_step_is_constant_for_rposnet_and_grows_for_the_transformer():
    """Total decoding FLOPs (per token x steps) at 10, 40 and 70 steps: rPosNet's K-value window makes every
    step cost the same (second difference 0); the Transformer's step n attends over n keys, so its second
    difference is 30 x 30 steps of 4 d per layer and beam row."""
    def totals(model):
        per_token = flops.decoding_flops(model, 9, [40, 70, 10], 2)
        return [steps * per_token[steps] for steps in (10, 40, 70)]

    rposnet = totals(build_model(["--posnet-max-relative", str(K)], arch="rposnet_transformer_tiny")[0])
    transformer = totals(build_model(arch="posnet_transformer_tiny")[0])
    assert rposnet[2] - 2 * rposnet[1] + rposnet[0] == pytest.approx(0, abs=1e-6)
    assert transformer[2] - 2 * transformer[1] + transformer[0] == pytest.approx(30 * 30 * 4 * D * DECODER_LAYERS * 2)


def test_training_flops_differ_by_the_decoder_self_attention_alone():
    """A training step of the Transformer and of AAN+ AVG (the same model but for decoder self-attention,
    whose gate costs what q, k, v and output projections cost): per target token of T-token sentences,
    the Transformer's every decoder layer adds scores and weighted sums, 4 T d forward (2 products) and
    10 T d backward in torch's CPU attention kernel (it recomputes the scores, then the gradients of both
    operands of both products: 5 products)."""
    length = 10
    transformer, aan = (training_step.TrainingStep(arch, 2, length, 40) for arch in
                        ("posnet_transformer_tiny", "aan_plus_avg_tiny"))
    layers, dim = len(transformer.model.decoder.layers), transformer.model.decoder.embed_dim
    difference = transformer.first_step()["flops_per_token"] - aan.first_step()["flops_per_token"]
    assert difference == 14 * length * dim * layers
