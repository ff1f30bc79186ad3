"""TISA (Wennberg & Henter) in machine translation: our experiment, the paper evaluated on GLUE.

Translation-invariant positional scoring (S = 5 kernels per head and layer, the paper's best GLUE setting,
with the reference code's random initialisation) in the encoder and decoder self-attention: (a) beside the
sinusoidal position embeddings, (b) instead of them, and S = 0 (no position information at all), against
the Transformer; base on WMT14 En->De and small on IWSLT14 De->En, trained and scored as the PosNet
paper's Tables 2 and 3 (:mod:`.posnet`).
"""
from . import posnet
from .table import Table, col, flags, run, scores

ROWS = [("transformer", "Transformer"), ("tisa_a", "TISA (a): beside position embeddings"),
        ("tisa_b", "TISA (b): instead of position embeddings"), ("tisa_s0", "S=0: no position information")]
# row -> (architecture without its size, flags beside it)
MODELS = {"transformer": ("posnet_transformer", ()), "tisa_a": ("tisa_transformer", flags("--tisa-kernels 5")),
          "tisa_b": ("tisa_nope_transformer", flags("--tisa-kernels 5")),
          "tisa_s0": ("tisa_nope_transformer", flags("--tisa-kernels 0"))}
_SETTINGS = [("base", posnet.EN_DE), ("small", posnet.DE_EN)]

TABLES = [
    Table("tisa-mt", "TISA in machine translation (our experiment; the TISA paper evaluated on GLUE)",
          [col(posnet.EN_DE, "params", "Base Params")] + scores(posnet.EN_DE, "Base En-De", ("sacrebleu",)) +
          [col(posnet.DE_EN, "params", "Small Params")] + scores(posnet.DE_EN, "Small De-En", ("sacrebleu",)),
          ROWS, [run(row, ds, posnet.SIZES[size], ("--arch", f"{MODELS[row][0]}_{size}") + MODELS[row][1] +
                     posnet.embeddings(ds)) for size, ds in _SETTINGS for row, _ in ROWS],
          marks=[("transformer", "†")],
          notes=["No paper figures exist for this table. †: differs from the Transformer (paired bootstrap, "
                 "p <= 0.05)."]),
]
