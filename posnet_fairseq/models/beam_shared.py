"""Beam-shared encoder states: in beam search, the encoder side is kept once per sentence, not per hypothesis.

fairseq's beam search (``SequenceGenerator``) encodes a batch of sentences, expands the encoder output to
one row per hypothesis (each sentence's row repeated ``beam`` times in place), and after every step
reorders the encoder output and every cached state by the hypotheses' parents. A parent is always a
hypothesis of the same sentence, so the rows of the encoder output, alike within a sentence, come out of
that reorder unchanged: the copy does nothing. fairseq's Transformer makes it nonetheless, at every step
(the encoder output, its padding mask and embeddings), and its cross attention projects, caches and reads
its keys and values per hypothesis: ``beam`` copies of each, read at every step.

fairseq's MultiheadAttention has a mode for this, ``set_beam_size`` (its "beamable" encoder-decoder
attention, which fairseq's BART uses): the first step projects one key and value row per sentence, and
every hypothesis of the sentence attends to it. The plugin's model uses the mode; prepared for generation
(``make_generation_fast_``, as fairseq-generate prepares it), it runs a decoding step of its own in it
(``models/beam_cross_attention.py``: the keys, values and padding mask cached once per search in the layout
of the step's two batched products). :class:`BeamSharing` decides when:

* the beam is read from the expansion itself: a reorder that repeats each of the encoder's rows ``k``
  times in place puts the decoder's cross attentions (fairseq's MultiheadAttention at the cross site:
  ``mha``, ``learned_cross``) in beam mode ``k``; every encoder forward sets them back to 1 (training,
  scoring, and the next batch, whatever its beam). SequenceGenerator's own ``set_beam_size`` call is
  not relied on: it is skipped for beam 1, which would leave a previous generation's beam in place;
* while a beam is shared, a reorder that keeps the number of rows (within sentences) returns the encoder
  output as it is; one that drops finished sentences copies the remaining rows, as before.

Other cross-site mixers keep their states per hypothesis and reorder them as before: the encoder output
they read has the same values in every hypothesis of a sentence either way. In fp32 the outputs equal the
per-hypothesis path's up to float rounding (the cross attention's products are summed in another order);
in int8 (``models/int8.py``) such rounding differences can move a dynamically quantised activation by a
step.

``fairseq-generate --no-beamable-mm`` keeps the cross attention per hypothesis (fairseq's plain path: its
keys and values projected and cached for every hypothesis; the module stays fairseq's) and still skips the
encoder output's reorders within sentences, which copy equal rows onto each other: its outputs are those of
fairseq's per-hypothesis path exactly. The paths trade kernels for memory traffic: a beam mode reads each
sentence's keys and values once instead of ``beam`` times, but fairseq's own step lays the beam out with
permutes that it copies. Per layer and step, the operators that would launch a GPU kernel
(``benchmark/launches.py``, counted on the CPU by tests/test_beam_cross_attention.py): 9 on the
per-hypothesis path, 13 in fairseq's beam mode, 7 in the plugin's step. On a GPU, where a step is bound by
kernel launches, either may be faster; ``benchmark.decode_speed --plain-beam`` times both in one run. On an
H200 (docs/gpu/2026-11-28-h200: base, batch 128, 80 tokens, beam 4), against fairseq's beam mode, the
per-hypothesis cross attention decoded 1.33x (Transformer), 1.24x (AAN+ AVG) and 1.44x (HC-SA) as fast on
the medians of 5 noisy rounds, and the Transformer's step launched 191 kernels without the beam mode against
215 with it; so the beam mode is kept to the devices of ``BEAMABLE_DEVICES`` (the CPU, where it is the
faster) and elsewhere only the encoder output's reorders are skipped (docs/install.md, "Two GPU runs on a
lent H200"). The plugin's step has not run on a GPU yet.
"""
import torch
from fairseq.modules import MultiheadAttention

from .beam_cross_attention import BeamCrossAttention


# The devices where a shared beam puts the cross attention in fairseq's beamable mode (the module doc).
BEAMABLE_DEVICES = ("cpu",)


class BeamSharing:
    """The beam-shared state of one encoder-decoder model (see the module doc)."""

    def __init__(self, decoder):
        # Exactly fairseq's attention: a module wrapping one (e.g. a gate) may read its cache per hypothesis.
        self.cross_attentions = [m for m in decoder.modules()
                                 if type(m) is MultiheadAttention and m.encoder_decoder_attention]
        self.beamable = True  # the cross attention in beam mode while a beam is shared
        self.beam = 1

    def disable(self):
        """The cross attention per hypothesis from now on (``fairseq-generate --no-beamable-mm``); the encoder
        output's reorders within sentences are still skipped (the module doc)."""
        self.beamable = False
        self._set(self.beam)

    def adopt_step(self):
        """The cross attention's beam-mode step the plugin's own from now on (``beam_cross_attention.py``): the
        model's ``make_generation_fast_`` calls it, unless fairseq-generate runs with ``--no-beamable-mm``."""
        for attention in self.cross_attentions:
            BeamCrossAttention.adopt(attention)

    def reset(self):
        """A new encoder output: per hypothesis until its expansion says otherwise."""
        if self.beam != 1:
            self._set(1)

    def _set(self, beam, beamable_device=True):
        self.beam = beam
        for attention in self.cross_attentions:
            attention.set_beam_size(beam if self.beamable and beamable_device else 1)

    def reorder(self, encoder_out, new_order, reorder):
        """``reorder(encoder_out, new_order)`` (the encoder's own reorder), skipped where it would copy
        each row onto an equal one; an expansion of every row ``k`` times in place sets beam mode ``k``."""
        states = encoder_out["encoder_out"]
        if not states:
            return reorder(encoder_out, new_order)
        rows = states[0].size(1)  # T x B x C
        if self.beam > 1 and new_order.numel() == rows:
            return encoder_out
        beam = expansion(new_order, rows)
        if beam > 1:
            self._set(beam, new_order.device.type in BEAMABLE_DEVICES)
        return reorder(encoder_out, new_order)


def expansion(new_order, rows: int) -> int:
    """``k`` when ``new_order`` repeats each of ``rows`` rows ``k`` times in place (0 0 0 1 1 1 ...: beam
    search's expansion of the encoder output), else 1."""
    beam, rest = divmod(new_order.numel(), rows)
    if rest or beam < 2:
        return 1
    repeated = torch.arange(rows, device=new_order.device).repeat_interleave(beam)
    return beam if torch.equal(new_order, repeated) else 1
