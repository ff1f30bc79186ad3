"""How each trained model mixes positions: mean self-attention weight by offset k = j - i.

Every mixer honours fairseq's MultiheadAttention contract, so asking a
self-attention site for its weights (``need_weights=True``) gives, for any
mechanism, the B x T x S matrix it mixes with (mean over heads). For a
position-only mixer (aPosNet, rPosNet, LinearNet, LightConv, hard-coded
Gaussians) the matrix does not depend on the words; for content attention
(Transformer, Shaw, TISA) it does, and the profile is its mean over the
sentences. The profile of a site is the mean weight that a query at real
position i gives the key at i + k, over 64 test sentences the model accepts
(where both positions are real words, not padding) and over the layers. Mixers that expose no weights (AAN+
keeps running sums) have no profile at that site.
"""
import torch

SITES = {"encoder": "encoder self-attention", "decoder": "decoder self-attention"}


@torch.no_grad()
def offset_profiles(checkpoint, data_bin, sentences=64, max_offset=10):
    """{site: (offsets, mean weights) or None} for the model of ``checkpoint`` on ``sentences`` test
    sentences spread evenly over the test set."""
    from .. import precompute

    _, task, model = precompute.load_checkpoint_model(checkpoint, data_bin)
    task.load_dataset("test")
    dataset = task.dataset("test")
    # Sentences the model accepts (a fixed-length mixer takes only so many positions), evenly
    # spaced: a length-stratified test set is ordered by length.
    max_source, max_target = model.max_positions()
    fit = [i for i in range(len(dataset))
           if dataset.src_sizes[i] <= max_source and dataset.tgt_sizes[i] <= max_target]
    step = max(1, len(fit) // sentences)
    batch = dataset.collater([dataset[i] for i in fit[::step][:sentences]])
    captured = {site: [] for site in SITES}
    busy = set()

    def hook(site):
        def capture(module, args, kwargs, output):
            if id(module) in busy:
                return
            busy.add(id(module))
            try:
                weights = module(*args, **dict(kwargs, need_weights=True, need_head_weights=False))[1]
            finally:
                busy.discard(id(module))
            if weights is not None:
                captured[site].append(weights.float())
        return capture

    handles = [layer.self_attn.register_forward_hook(hook(site), with_kwargs=True)
               for site, side in (("encoder", model.encoder), ("decoder", model.decoder)) for layer in side.layers]
    try:
        model(**batch["net_input"])
    finally:
        for handle in handles:
            handle.remove()
    pad = task.target_dictionary.pad()
    query_pad = {"encoder": batch["net_input"]["src_tokens"].eq(pad),
                 "decoder": batch["net_input"]["prev_output_tokens"].eq(pad)}
    offsets = list(range(-max_offset, max_offset + 1))
    profiles = {}
    for site, layers in captured.items():
        if not layers:
            profiles[site] = None
            continue
        sums, counts = torch.zeros(len(offsets)), torch.zeros(len(offsets))
        for weights in layers:  # B x T x S
            valid = ~query_pad[site]
            for n, k in enumerate(offsets):
                diagonal = torch.diagonal(weights, offset=k, dim1=1, dim2=2)  # B x (T - |k|): w(i, i + k)
                # real queries whose key i + k is real too (keys and queries are the same tokens)
                rows = (valid[:, max(0, -k): max(0, -k) + diagonal.size(1)]
                        & valid[:, max(0, k): max(0, k) + diagonal.size(1)])
                sums[n] += diagonal[rows].sum()
                counts[n] += rows.sum()
        profiles[site] = (offsets, (sums / counts.clamp(min=1)).tolist())
    return profiles
