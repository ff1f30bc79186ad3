"""The PosNet paper's tables (Schmidt & Di Gangi): Tables 2 to 6, their rows, settings and figures.

From the paper (section 5): Adam; 4000 warm-up updates; Base/Big as Vaswani et al. (2017), Small = Base
with FFN 1024 and dropout 0.3 (the *_small presets: 8 heads, as Table 3's parameter counts need);
updates: small 30k, base 150k, big 300k; ~16k target tokens per update (small), ~27k (base, big);
sentences of at most 128 tokens; the final model averages the best checkpoint (by validation
perplexity) and the ones after it, else the last ones: small 30 checkpoints 300 updates apart, base
7 x 1000, big 20 x 600; beam 12; rPosNet and LightConv with K = 16 (base, small) and K = 8 (big);
rPosNet with learned position embeddings, every other model sinusoidal; En-De/En-Fr/De-En one joint
vocabulary with all embeddings shared, En-Zh separate vocabularies with untied decoder embeddings (the
parameter counts of Tables 2, 3 and 5 fit only these).

Not in the paper, from the authors' code (apptek/posnet-position_based_attention: its configs and
pytorchmt/model/optimizers.py): the peak learning rate lr_scale * d^-0.5 * 4000^-0.5 of its warm-up
schedule (the paper's "warmup learning rate schedule", Vaswani et al.'s; fairseq's inverse_sqrt with that
peak is the same curve): base 7e-4 (d 512, lr_scale 1.0), big 4.9e-4 (d 1024, 1.0), small 1.4e-3 (d 512,
lr_scale 2.0 in every *.iwslt.de-en.yaml); Adam eps 1e-9 (also Vaswani et al.'s); WMT14 En-De prepared
with 40000 merges and News Commentary v12 (data/wmt14/en-de/prepare.bash; Table 1's "44k" is the vocabulary
they give) and references with ’ written ' (as every recipe's). Ours: Adam betas (0.9, 0.98), label
smoothing 0.1 and big dropout 0.3 (Vaswani et al.; the configs agree); no weight decay; length-normalised
beam scores (lenpen 1; AppTek's length_norm); --keep-interval-updates 3x the averaged count and
--keep-best-checkpoints the averaged count (the averaging's fallback when the best is older than that window:
the N best copies in place of the best and the N-1 after it); the seed.
"Best by perplexity": the lowest validation nll_loss (perplexity = 2^nll_loss, same order, finer rounding
than fairseq's ppl).

Differences that stay (DIFFERENCES, in every table's notes): post-norm layers as the paper (it follows
Vaswani et al.; the code is pre-norm); fairseq's Xavier initialisation (the code: Glorot uniform scaled by
0.78, variance_scaling_scale).
"""
from .table import Settings, Table, col, flags, rows_and_runs, run, scores

# The datasets as the paper prepared them (table_runs/datasets.py): Table 1's 44k En-De vocabulary (40000
# merges, the authors' script) and ~46k En-Fr BPE.
EN_DE, EN_FR, EN_ZH, DE_EN = "wmt14_en_de_bpe40k", "wmt14_en_fr_bpe40k", "wmt18_en_zh", "iwslt14_de_en"

_COMMON = flags("--optimizer adam --adam-betas (0.9,0.98) --adam-eps 1e-09 --clip-norm 0.0 --lr-scheduler inverse_sqrt "
                "--warmup-updates 4000 --warmup-init-lr 1e-07 --weight-decay 0.0 "
                "--criterion label_smoothed_cross_entropy --label-smoothing 0.1 "
                "--max-source-positions 128 --max-target-positions 128 "
                "--best-checkpoint-metric nll_loss --no-epoch-checkpoints --seed 1")
_GEN = flags("--beam 12 --lenpen 1.0 --batch-size 64")
SIZES = {
    "base": Settings(flags("--lr 0.0007 --dropout 0.1 --max-update 150000 --max-tokens 4500 --save-interval-updates "
                           "1000 --keep-interval-updates 21 --keep-best-checkpoints 7") + _COMMON, _GEN, "best 7",
                     27000),
    "big": Settings(flags("--lr 0.000494 --dropout 0.3 --max-update 300000 --max-tokens 3500 --save-interval-updates "
                          "600 --keep-interval-updates 60 --keep-best-checkpoints 20") + _COMMON, _GEN, "best 20",
                    27000),
    "small": Settings(flags("--lr 0.0014 --dropout 0.3 --max-update 30000 --max-tokens 4000 --save-interval-updates "
                            "300 --keep-interval-updates 90 --keep-best-checkpoints 30") + _COMMON, _GEN, "best 30",
                      16000),
}


def embeddings(dataset):
    """One joint vocabulary shared by all embeddings, except En-Zh (separate, untied)."""
    return () if dataset == EN_ZH else ("--share-all-embeddings",)


# AppTek's GaussianNet (the paper's baseline, Eq. 12): fixed Gaussians (sigma 1) centred at n-1, n, n+1
# (encoder heads, cyclic) and n-1, n (decoder heads), biased value/output projections.
GAUSSIANNET = flags("--encoder-self-mixer hc_gaussian --decoder-self-mixer hc_gaussian "
                    "--hc-encoder-offsets=-1,0,1 --hc-decoder-offsets=-1,0 --hc-bias")
# LightConv as the paper's Eq. 14: softmax-normalised kernel over +-K, on GLU(W_V x) (value projection
# D -> 2D, GLU, no gate, no norm): Table 5's "+ GLU [LightConv]" row and the "LightConv" rows of Tables 2
# and 3 (their counts include the GLU's D^2 per layer).
LIGHTCONV_GLU = flags("--encoder-self-gating on --decoder-self-gating on --gating-value-act glu "
                      "--gating-gate-act none --gating-no-value-norm")
# The models of Tables 2 and 3: row -> (the paper's label, architecture without its size, flags beside it).
MODELS = {
    "transformer": ("Transformer", "posnet_transformer", ()),
    "shaw": ("Shaw et al. (2018)", "shaw_transformer", ()),
    "fouriernet": ("FourierNet", "fouriernet_transformer", ()),
    "gaussiannet": ("GaussianNet", "posnet_transformer", GAUSSIANNET),
    "linearnet": ("LinearNet", "linearnet_transformer", ()),
    "lightconv": ("LightConv", "lightconv_apptek_transformer", LIGHTCONV_GLU),
    "glinearnet": ("gLinearNet", "glinearnet_transformer", ()),
    "aposnet": ("aPosNet", "aposnet_transformer", ()),
    "rposnet": ("rPosNet", "rposnet_transformer", ()),
}
ROWS = [(row, label) for row, (label, _, _) in MODELS.items()]


def model(row, size):
    """The flags of one model of Tables 2 and 3 at ``size``; LightConv's K is 8 for big (section 5.2)."""
    _, arch, extra = MODELS[row]
    k = flags("--lightconv-max-relative 8") if size == "big" and row == "lightconv" else ()
    return ("--arch", f"{arch}_{size}") + extra + k


def _models_on(settings):
    """Tables 2 and 3: every model at each (size, dataset)."""
    return [run(row, ds, SIZES[size], model(row, size) + embeddings(ds)) for size, ds in settings for row in MODELS]


def _base(dataset, *rows):
    """Tables 4 to 6: base models on one dataset; each row (key, label, model flags)."""
    return rows_and_runs(dataset, SIZES["base"], [(key, label, m + embeddings(dataset)) for key, label, m in rows])


MARKS = [("transformer", "†"), ("shaw", "‡")]
DIFFERENCES = ("Differences from the authors' code that stay: post-norm layers, as the paper (it follows Vaswani et "
               "al.; the code is pre-norm); fairseq's Xavier initialisation (the code: Glorot uniform scaled by 0.78). "
               "As the code: 40000 BPE merges and News Commentary v12 for En-De, ’ written ' in the references, Adam "
               "eps 1e-9, Small peak lr 1.4e-3 (lr_scale 2.0).")
NOTE = ("Params: ours counts the trained model (unique parameters); the paper counts aPosNet and rPosNet after "
        "folding the position energies into N = 128 tables (its Table 7): posnet-precompute gives that count.")
NO_MARKS = "No significance marks: the paper marks none in this table."

# Table 4: (enc-self, dec-self, dec-cross) with rPosNet (✓) or multi-head attention (✗).
_R = flags("--arch rposnet_transformer_base")
_NO_ENC, _NO_DEC, _CROSS = flags("--encoder-self-mixer mha"), flags("--decoder-self-mixer mha"), \
    flags("--cross-mixer rposnet")
_T4 = _base(EN_DE, ("transformer", "✗ ✗ ✗", flags("--arch posnet_transformer_base")),
            ("enc", "✓ ✗ ✗", _R + _NO_DEC), ("dec", "✗ ✓ ✗", _R + _NO_ENC),
            ("cross", "✗ ✗ ✓", _R + _NO_ENC + _NO_DEC + _CROSS), ("enc_dec", "✓ ✓ ✗", _R),
            ("enc_cross", "✓ ✗ ✓", _R + _NO_DEC + _CROSS), ("dec_cross", "✗ ✓ ✓", _R + _NO_ENC + _CROSS),
            ("enc_dec_cross", "✓ ✓ ✓", _R + _CROSS))
_LC = flags("--arch lightconv_apptek_transformer_base")
_T5 = _base(EN_ZH, ("light_convolution", "Light Convolution", _LC),
            ("lightconv", "+ GLU [LightConv]", _LC + LIGHTCONV_GLU),
            ("lightconv_gelu", "+ GeLU Gating", flags("--arch lightconv_apptek_gated_transformer_base")),
            ("lightconv_global", "+ Global Context", flags("--arch lightconv_apptek_global_transformer_base")),
            ("rposnet", "rPosNet", flags("--arch rposnet_transformer_base")))
_ON, _OFF = flags("--encoder-self-gating on --decoder-self-gating on"), \
    flags("--encoder-self-gating off --decoder-self-gating off")
_T6 = _base(EN_DE, ("transformer", "Transformer ✗", flags("--arch posnet_transformer_base")),
            ("transformer_gated", "Transformer ✓", flags("--arch posnet_transformer_base") + _ON),
            ("shaw", "Shaw et al. (2018) ✗", flags("--arch shaw_transformer_base")),
            ("shaw_gated", "Shaw et al. (2018) ✓", flags("--arch shaw_transformer_base") + _ON),
            ("relattn", "Rel. Self-Attention ✗", flags("--arch relattn_transformer_base")),
            ("relattn_gated", "Rel. Self-Attention ✓", flags("--arch relattn_transformer_base") + _ON),
            ("aposnet_ungated", "aPosNet ✗", flags("--arch aposnet_transformer_base") + _OFF),
            ("aposnet", "aPosNet ✓", flags("--arch aposnet_transformer_base")),
            ("rposnet_ungated", "rPosNet ✗", flags("--arch rposnet_transformer_base") + _OFF),
            ("rposnet", "rPosNet ✓", flags("--arch rposnet_transformer_base")))

_T2_COLUMNS = [col(EN_DE, "params", "Params (En-De)")] + scores(EN_DE, "En-De") + scores(EN_FR, "En-Fr") + \
    scores(EN_ZH, "En-Zh")
_T3_COLUMNS = [col(EN_DE, "params", "Big Params")] + scores(EN_DE, "Big En-De") + \
    [col(DE_EN, "params", "Small Params")] + scores(DE_EN, "Small De-En")
TABLES = [
    Table("posnet-table2",
          "PosNet paper, Table 2: base models on WMT14 En-De, WMT14 En-Fr and WMT18 En-Zh (newstest2017)",
          _T2_COLUMNS, ROWS, _models_on([("base", EN_DE), ("base", EN_FR), ("base", EN_ZH)]), paper={
              "transformer": "66.5M 26.3 71.1 47.6 37.8 69.0 61.1 33.8 64.3 42.5",
              "shaw": "66.7M 26.3 71.4 48.6 37.8 69.2 61.6 34.0 64.6 43.5",
              "fouriernet": "63.4M 22.8†‡ 66.0†‡ 31.8†‡ 34.9†‡ 64.2†‡ 49.3†‡ 31.5†‡ 61.6†‡ 34.9†‡",
              "gaussiannet": "60.2M 25.3†‡ 68.1†‡ 39.5†‡ 36.7†‡ 66.9†‡ 55.7†‡ 32.6†‡ 62.6†‡ 36.8†‡",
              "linearnet": "61.8M 25.3†‡ 69.8†‡ 44.3†‡ 37.0†‡ 67.7†‡ 58.2†‡ 33.1†‡ 63.3†‡ 40.2†‡",
              "lightconv": "63.4M 26.0†‡ 70.6†‡ 46.7†‡ 37.4†‡ 68.6†‡ 60.3†‡ 33.0†‡ 63.5†‡ 41.1†‡",
              "glinearnet": "65.0M 26.1 70.8‡ 46.7‡ 37.8 69.1 61.3 33.5‡ 64.0‡ 42.4‡",
              "aposnet": "65.0M 25.9†‡ 70.6†‡ 46.1†‡ 37.7 69.0 61.4 33.6‡ 63.7‡ 42.2‡",
              "rposnet": "63.9M 26.6 71.4† 48.6 37.9 69.4† 61.8 33.8 64.2 43.1",
          }, marks=MARKS, notes=[NOTE, DIFFERENCES]),
    Table("posnet-table3", "PosNet paper, Table 3: big models on WMT14 En-De, small models on IWSLT14 De-En",
          _T3_COLUMNS, ROWS, _models_on([("big", EN_DE), ("small", DE_EN)]), paper={
              "transformer": "221M 27.1 72.3 50.4 36.8M 35.0 69.3 37.6",
              "shaw": "221M 27.3 72.7† 51.5† 37.0M 35.4† 69.7† 38.8†",
              "fouriernet": "208M 24.0†‡ 67.6†‡ 36.5†‡ 33.6M 32.5†‡ 66.9†‡ 28.2†‡",
              "gaussiannet": "196M 26.3†‡ 69.4†‡ 42.3†‡ 30.4M 34.3†‡ 68.4†‡ 34.1†‡",
              "linearnet": "199M 26.6†‡ 71.3†‡ 48.0†‡ 32.0M 34.0†‡ 68.3†‡ 33.9†‡",
              "lightconv": "209M 26.8†‡ 71.7†‡ 49.1†‡ 33.6M 34.4†‡ 68.9†‡ 35.5†‡",
              "glinearnet": "212M 27.1 72.2‡ 49.9‡ 35.2M 34.5†‡ 69.0†‡ 36.3†‡",
              "aposnet": "212M 26.8†‡ 71.4†‡ 47.7†‡ 35.2M 34.2†‡ 68.5†‡ 34.7†‡",
              "rposnet": "210M 27.3 72.2‡ 50.4‡ 34.1M 35.1‡ 69.5‡ 38.2‡",
          }, marks=MARKS, notes=[NOTE, DIFFERENCES]),
    Table("posnet-table4", "PosNet paper, Table 4: which attention layers use rPosNet (enc-self / dec-self / "
          "dec-cross), base, En-De", scores(EN_DE, "En-De"), *_T4, paper={
              "transformer": "26.3 71.1 47.6", "enc": "26.4 71.2 48.1", "dec": "26.1 71.1 47.2",
              "cross": "24.6 69.2 43.8", "enc_dec": "26.6 71.4 48.6", "enc_cross": "24.8 69.8 45.2",
              "dec_cross": "24.3 69.0 42.8", "enc_dec_cross": "24.9 69.3 43.5",
          }, notes=[NO_MARKS, DIFFERENCES]),
    Table("posnet-table5", "PosNet paper, Table 5: from LightConv to rPosNet, base, En-Zh (newstest2017)",
          [col(EN_ZH, "params", "Params")] + scores(EN_ZH, "En-Zh"), *_T5, paper={
              "light_convolution": "101M 33.2 63.4 40.6", "lightconv": "104M 33.0 63.5 41.1",
              "lightconv_gelu": "104M 33.5 63.7 42.4", "lightconv_global": "104M 33.6 63.9 42.4",
              "rposnet": "104M 33.8 64.2 43.1",
          }, notes=[NO_MARKS, "Params: the paper counts rPosNet after folding its energies into tables (see Table "
                    "2's note).", DIFFERENCES]),
    Table("posnet-table6", "PosNet paper, Table 6: attention with and without the GeLU gating, base, En-De",
          [col(EN_DE, "params", "Params")] + scores(EN_DE, "En-De"), *_T6, paper={
              "transformer": "66.5M 26.3 71.1 47.6", "transformer_gated": "69.7M 26.6 71.6 49.6",
              "shaw": "66.7M 26.3 71.4 48.6", "shaw_gated": "69.9M 26.7 71.8 49.5",
              "relattn": "63.6M 25.7 70.4 46.4", "relattn_gated": "66.7M 26.5 71.3 49.0",
              "aposnet_ungated": "61.8M 25.4 69.4 42.6", "aposnet": "65.0M 25.9 70.6 46.1",
              "rposnet_ungated": "60.8M 25.3 70.1 45.1", "rposnet": "63.9M 26.6 71.4 48.6",
          }, notes=[NO_MARKS, NOTE, DIFFERENCES]),
]
