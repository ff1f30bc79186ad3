"""The AAN+ paper's parameter counts (Zhang et al., Tables 2 and 4, WMT14 En-De) and the
vocabulary they imply, shared by tests/test_ssru.py and tests/test_linear_attention.py.

The tables give the Transformer 72.31M (base), 116.45M (deep: 12 + 12 layers)
and 232.70M (big); the paper does not state its vocabulary (BPE with 32K
merges). Built as fairseq's post-norm Transformer (no final LayerNorm, no
output bias) with one embedding table shared by the encoder, the decoder and
the output projection, a model has ``layers + rows x d`` parameters, and
every count of Tables 2 and 4 for the Transformer, SSRU, linear attention and
AAN+ AVG/FAR/NER at base, deep and big (18 figures) rounds to the paper's
0.01M exactly when the table has 55,023 or 55,024 rows
(:func:`consistent_rows` finds that range from the figures). Two per-language
tables of about 27.5K rows with tied output embeddings give the same counts:
the tables fix the number of embedding rows, not how they are split.

The AAN+ WET rows (73.88M, 119.59M, 238.99M) are left out: they come out
only if WET's ``U`` has a bias (d more parameters per layer: 238.98M and
119.58M without it), which ``aan.py`` leaves out because a per-dimension bias
cancels in the normalisation of exp weights.
"""
import torch
from fairseq.tasks.translation import TranslationTask

import fairseq_testing as ft

# (model, size) -> the paper's "#Params" in millions (Table 2: base; Table 4: deep, big).
PAPER = {
    ("transformer", "base"): 72.31, ("ssru", "base"): 69.16, ("linear_attention", "base"): 72.31,
    ("aan_plus_avg", "base"): 72.30, ("aan_plus_far", "base"): 72.30, ("aan_plus_ner", "base"): 72.30,
    ("transformer", "deep"): 116.45, ("ssru", "deep"): 110.14, ("linear_attention", "deep"): 116.45,
    ("aan_plus_avg", "deep"): 116.44, ("aan_plus_far", "deep"): 116.44, ("aan_plus_ner", "deep"): 116.44,
    ("transformer", "big"): 232.70, ("ssru", "big"): 220.10, ("linear_attention", "big"): 232.70,
    ("aan_plus_avg", "big"): 232.69, ("aan_plus_far", "big"): 232.69, ("aan_plus_ner", "big"): 232.69,
}
# A joint dictionary of 55,020 words + fairseq's 4 special symbols: 55,024 rows.
PAPER_WORDS = 55020
SUFFIX = {"base": "", "deep": "_deep", "big": "_big"}


def arch_flags(model, size):
    """The preset of ``model`` at ``size`` (the Transformer has no deep preset: base with 12 + 12 layers)."""
    if model == "transformer":
        if size == "deep":
            return ["--arch", "posnet_transformer_base", "--encoder-layers", "12", "--decoder-layers", "12"]
        return ["--arch", f"posnet_transformer_{size}"]
    return ["--arch", model + SUFFIX[size]]


def count(model, size, words=PAPER_WORDS):
    """(trainable parameters, embedding rows, embedding dim) of the preset, built on the meta device (no memory)."""
    args = ft.parse_train_args([*arch_flags(model, size), "--share-all-embeddings"])
    dictionary = ft.dummy_dictionary(words)
    task = TranslationTask(args, dictionary, dictionary)
    with torch.device("meta"):
        model = task.build_model(args)
    return sum(p.numel() for p in model.parameters() if p.requires_grad), len(dictionary), args.encoder_embed_dim


def millions(n):
    return round(n / 1e6, 2)


def consistent_rows(counts, candidates):
    """The embedding-row counts among ``candidates`` for which every figure in ``counts`` rounds to the paper's.

    ``counts`` maps (model, size) to (parameters, rows, dim) as :func:`count`
    returns it; a model's count moves by ``dim`` per embedding row.
    """
    return [n for n in candidates
            if all(millions(params + (n - rows) * dim) == PAPER[key] for key, (params, rows, dim) in counts.items())]
