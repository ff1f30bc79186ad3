"""fairseq's token position embeddings (sinusoidal or learned) at the positions a training augmentation drew.

fairseq's position embedding modules compute their positions from the padding mask themselves and take no
positions when they have a padding index. A forward hook replaces their output, during a side's forward call
that drew positions (``mixers/forward_context.py``, ``position_augmentation``) or spreads them at test time,
by the embeddings of those positions; outside such a call (evaluation, incremental decoding with the plain
positions) the module's own output stands. No parameter or buffer changes, so checkpoints are those of the
plain model.
"""
import torch.nn.functional as F
from fairseq.modules import LearnedPositionalEmbedding, SinusoidalPositionalEmbedding


def augment(embed_positions, forward_context, augmentation, flag: str, limit_flag: str):
    """Hooks ``embed_positions`` so that it embeds ``forward_context.positions`` when they are set.

    ``flag`` is the side's augmentation flag, ``limit_flag`` its --max-*-positions: a learned table has no
    row past it, and errors name both.
    """
    learned = isinstance(embed_positions, LearnedPositionalEmbedding)
    if not learned and not isinstance(embed_positions, SinusoidalPositionalEmbedding):
        raise ValueError(f"{flag} {augmentation.method}: the position embeddings are a "
                         f"{type(embed_positions).__name__}, neither sinusoidal nor learned")
    if learned and augmentation.method == "randomized" and augmentation.range > embed_positions.max_positions:
        raise ValueError(f"--randomized-positions-range {augmentation.range}: the learned position embeddings "
                         f"have {embed_positions.max_positions} positions ({limit_flag}); choose at most that")

    def embed_drawn_positions(module, args, output):
        positions = forward_context.positions
        if positions is None:
            return output
        tokens = args[0][:, -positions.size(1):]  # an incremental decoding step has its own position only
        # fairseq's indices: padding_idx + 1 + the 0-based position; pads index padding_idx (a zero row).
        index = (positions + module.padding_idx + 1).masked_fill(tokens.eq(module.padding_idx), module.padding_idx)
        needed = forward_context.position_bound
        if learned:
            if needed > module.max_positions:
                raise ValueError(f"{flag} {augmentation.method}: positions up to {needed - 1} in a batch of "
                                 f"{args[0].size(1)} tokens, past the {module.max_positions} learned positions "
                                 f"({limit_flag}); "
                                 + ("lower --shape-max-offset or " if augmentation.method == "shape" else "")
                                 + f"raise {limit_flag}")
            return F.embedding(index, module.weight, module.padding_idx)
        if module.padding_idx + 1 + needed > module.weights.size(0):  # the sinusoid table grows as fairseq's does
            module.weights = SinusoidalPositionalEmbedding.get_embedding(
                module.padding_idx + 1 + needed, module.embedding_dim, module.padding_idx).to(module.weights)
        return module.weights.index_select(0, index.view(-1)).view(*index.shape, -1).detach()

    embed_positions.register_forward_hook(embed_drawn_positions)
    forward_context.position_readers += 1
