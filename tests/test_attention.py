"""attention.py: the softmax masks and the masked softmax that every attention-like mixer uses."""
import torch

from posnet_fairseq.mixers.attention import masked_softmax, softmax_masks


def test_softmax_masks_zero_the_rows_without_a_valid_key_and_hide_the_rest():
    """A row whose keys are all invalid (a pad query before any real key) sees every key, then is zeroed: no NaN
    in the weights or in the gradient; other rows are a softmax over their valid keys only."""
    logits = torch.randn(2, 1, 3, 4, requires_grad=True)
    invalid = torch.zeros(2, 1, 3, 4, dtype=torch.bool)
    invalid[0, 0, 0] = True  # an empty row
    invalid[1, 0, :, 2:] = True  # two hidden keys in every row of the second sentence
    hidden, empty = softmax_masks(invalid)
    assert empty.view(-1).tolist() == [True, False, False, False, False, False]
    assert not hidden[0, 0, 0].any() and torch.equal(hidden[1], invalid[1])
    probs = masked_softmax(logits, invalid)
    assert torch.equal(probs[0, 0, 0], torch.zeros(4))
    torch.testing.assert_close(probs[1, ..., :2], torch.softmax(logits[1, ..., :2], -1))
    assert torch.equal(probs[1, ..., 2:], torch.zeros(1, 3, 2))
    probs.pow(2).sum().backward()
    assert torch.isfinite(logits.grad).all() and torch.equal(logits.grad[0, 0, 0], torch.zeros(4))


def test_given_masks_broadcast_over_more_heads_as_the_masks_of_each_head_would():
    """posnet_layers.py takes the softmax of every layer's heads at once with the call's masks (B x 1 x T x S)
    unsqueezed to broadcast over the layers: each layer's weights are those of its own masked softmax; a mask
    that hides nothing is None in both forms, never a hidden None beside empty rows."""
    logits = torch.randn(2, 3, 4, 5, 5)
    invalid = torch.rand(2, 1, 5, 5) > 0.5
    invalid[1, 0, 2] = True  # an empty row
    masks = softmax_masks(invalid)
    every = masked_softmax(logits, None, masks=tuple(m.unsqueeze(1) for m in masks))
    for layer in range(3):
        torch.testing.assert_close(every[:, layer], masked_softmax(logits[:, layer], invalid), rtol=0, atol=0)
    assert softmax_masks(None) == (None, None)
    assert softmax_masks(invalid, empty_rows=False)[1] is None
