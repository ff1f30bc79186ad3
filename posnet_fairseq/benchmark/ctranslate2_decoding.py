"""The Transformer as users deploy it: converted with CTranslate2 and decoded in fp32 or int8, timed like fairseq.

CTranslate2 (``pip install -r requirements/ctranslate2.txt``) is optional:
without it :func:`missing` says so and the benchmarks print that in the row
instead of a figure.

Its fairseq converter (``ctranslate2.converters.FairseqConverter``, the code
behind ``ct2-fairseq-converter``) accepts only fairseq's own model classes
(``transformer`` and a few others), so a plugin checkpoint is first written
as a stock ``transformer`` checkpoint (:func:`as_stock_transformer`): the
same weights under the same names, the plugin's flags dropped. That loads
only when every attention sub-layer is fairseq's MultiheadAttention: the
Transformer with sinusoidal or learned positions converts. A model with
Shaw-relative or T5-bias self-attention goes to the plugin's own converter
instead (:mod:`.ctranslate2_relative`). Every other mechanism is refused by
the stock model's strict loading (its parameters have no place there) or by
the converter's own checks (e.g. a model without position embeddings).
:func:`conversion_error` gives the reason per model;
``tests/test_ctranslate2_decoding.py`` records it for every family and
docs/benchmarks.md lists the outcome.

:meth:`Translator.translate_timed` decodes the same test sources as
:func:`~.decode_speed.generate_timed` (the binarized split's tokens, EOS
added by CTranslate2 as fairseq adds it) with the same beam, batch and
forced length: ``min_decoding_length`` L and ``max_decoding_length`` L + 1,
so every hypothesis takes L + 1 decoder steps as fairseq's ``--min-len L
--max-len-b L`` does; one intra-op thread per ``threads``; on the CPU or, with
``device="cuda"``, on the GPU (its ``translate_batch`` returns when the GPU is
done, so its wall time is the GPU time fairseq's rows report as ``gpu_s``).
"""
import argparse
import os
import time

from ..plugin import PLUGIN_DIR

COMPUTE_TYPES = ("float32", "int8")  # the rows: fp32 and int8 weights (int8 also quantises activations per call)
ROW_NAMES = {"float32": "ctranslate2 fp32", "int8": "ctranslate2 int8"}


def missing():
    """Why the CTranslate2 rows cannot be measured (None: ctranslate2 is installed)."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError as err:
        return f"ctranslate2 is not installed ({err}; pip install -r requirements/ctranslate2.txt)"
    return None


def as_stock_transformer(checkpoint, path):
    """Writes ``checkpoint`` (a posnet_transformer) to ``path`` as fairseq's own ``transformer``: its weights
    and fairseq's model arguments, the plugin's flags left out. Returns (``path``, {flag: value} of the plugin
    flags that were set, which the stock model does not have)."""
    import torch
    from fairseq import checkpoint_utils
    from omegaconf import OmegaConf

    from .. import flags

    state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
    cfg = OmegaConf.to_container(state["cfg"], resolve=True, enum_to_str=True)
    model = cfg["model"]  # an argparse Namespace for the legacy models, as fairseq-train stores them
    items = model.items() if isinstance(model, dict) else vars(model).items()
    settings = flags.changed(model)
    plugin = {f.dest for group in flags.GROUPS for f in group.flags}
    kept = {k: v for k, v in items if k not in plugin}
    kept.update(_name="transformer", arch="transformer", user_dir=None)
    cfg["model"] = kept if isinstance(model, dict) else argparse.Namespace(**kept)
    cfg["common"]["user_dir"] = None
    torch.save({**state, "cfg": cfg, "args": None}, path)
    return path, settings


def convert(checkpoint, data_bin, output_dir, source_lang="src", target_lang="tgt"):
    """Converts ``checkpoint`` in this process into a CTranslate2 model at ``output_dir`` (fp32 weights;
    int8 is chosen when loading); relative self-attention through :mod:`.ctranslate2_relative`, which raises
    ValueError naming what it refuses. Raises what the converter or fairseq's strict loading raises, or, when
    both accept it (a mechanism with MultiheadAttention's parameter names, such as linear attention),
    ValueError naming the plugin flags the converted model would ignore."""
    from ctranslate2.converters import FairseqConverter

    from ..models import ds_init
    from . import ctranslate2_relative

    stock, settings = as_stock_transformer(checkpoint, output_dir.rstrip("/") + ".stock.pt")
    if ctranslate2_relative.handles(settings):
        return ctranslate2_relative.convert(checkpoint, data_bin, output_dir, source_lang, target_lang)
    converter = FairseqConverter(stock, data_bin, source_lang=source_lang, target_lang=target_lang,
                                 user_dir=PLUGIN_DIR)
    converted = converter.convert(output_dir, force=True)
    # depth-scaled initialisation changes the weights only, which the conversion carries
    changed = {flag: value for flag, value in settings.items() if flag not in {f.name for f in ds_init.FLAGS.flags}}
    if changed:
        raise ValueError("converted, but as fairseq's Transformer, which has no counterpart of "
                         + ", ".join(f"{flag} {value}" for flag, value in changed.items()))
    return converted


def _reason(err):
    """The refusal in one line: the converter's listed reasons, or what fairseq's strict loading missed."""
    text = str(err)
    reasons = [line[2:] for line in text.splitlines() if line.startswith("- ")]
    if reasons:
        return "; ".join(reasons)
    if "Error(s) in loading state_dict" in text:
        found = {}
        for line in text.splitlines():
            kind = line.strip().split(" key(s)")[0]
            if kind in ("Missing", "Unexpected"):
                keys = [k.strip(' ".') for k in line.split(":", 1)[1].split(",")]
                found[kind] = f"{kind.lower()} {len(keys)} parameters (e.g. {keys[0]})"
        return "fairseq's Transformer cannot load it: " + ", ".join(found.values())
    return text.strip().splitlines()[0] if text.strip() else type(err).__name__


def conversion_error(checkpoint, data_bin, output_dir, **langs):
    """None when ``checkpoint`` converts, else why not, in one line."""
    try:
        convert(checkpoint, data_bin, output_dir, **langs)
    except Exception as err:  # noqa: BLE001  (every refusal is the answer asked for)
        return _reason(err)
    return None


def source_sentences(data_bin, subset="test", source_lang="src", target_lang="tgt"):
    """The split's source sentences as token strings (without EOS), in the binarized order."""
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(os.path.join(data_bin, f"dict.{source_lang}.txt"))
    prefix = os.path.join(data_bin, f"{subset}.{source_lang}-{target_lang}.{source_lang}")
    dataset = data_utils.load_indexed_dataset(prefix, dictionary)
    return [[dictionary[int(i)] for i in dataset[k][:-1]] for k in range(len(dataset))]


class Translator:
    """A converted model loaded once per compute type on ``device`` ("cpu" or "cuda"), with ``threads``
    intra-op threads."""

    def __init__(self, model_dir, compute_type, threads=1, device="cpu"):
        import ctranslate2

        self.compute_type, self.device = compute_type, device
        self.engine = ctranslate2.Translator(model_dir, device=device, compute_type=compute_type,
                                             inter_threads=1, intra_threads=threads)

    def translate_timed(self, sources, length, beam=4, batch_size=32):
        """{"rate": sentences/s, "tokens_per_hyp": decoder steps per hypothesis (L + 1), "cpu_s": process CPU
        seconds} of decoding ``sources`` with every hypothesis forced to ``length`` tokens; on "cuda" also
        "gpu_s", the wall seconds."""
        wall, cpu = time.perf_counter(), time.process_time()
        results = self.engine.translate_batch(sources, max_batch_size=batch_size, beam_size=beam,
                                              min_decoding_length=length, max_decoding_length=length + 1)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        lengths = {len(r.hypotheses[0]) for r in results}
        if not lengths <= {length, length + 1}:
            raise RuntimeError(f"ctranslate2 decoded {sorted(lengths)} tokens where {length} were forced")
        timing = {"rate": len(sources) / wall, "tokens_per_hyp": length + 1, "cpu_s": cpu}
        return {**timing, "gpu_s": wall} if self.device == "cuda" else timing
