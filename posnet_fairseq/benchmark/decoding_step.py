"""One incremental decoding step of beam search, as fairseq's ``SequenceGenerator`` runs it on a model: the step
whose operators :mod:`.op_counts` counts and whose host time :mod:`.host_time` measures."""
import torch

from .training_step import build_without_data, dictionary


class DecodingStep:
    """``arch``'s step at position ``step`` on ``batch_size`` x ``beam`` hypotheses of ``source_length`` source
    tokens: reorder the encoder output (each sentence's repeated for its hypotheses) and the incremental state,
    then the decoder on the last token and the log-softmax, the model prepared as fairseq-generate prepares it
    (``make_generation_fast_``). :meth:`prepare` decodes the positions before ``step`` on fresh states; a call
    runs the step."""

    def __init__(self, arch, batch_size, beam, source_length, step, vocab, model_flags, device):
        from fairseq.sequence_generator import EnsembleModel

        words = dictionary(vocab)
        model, _ = build_without_data(["--arch", arch, *model_flags], words, seed=0)
        model.to(device).eval()
        # as fairseq-generate prepares it (prepare_for_inference_): e.g. rPosNet's energies folded
        model.make_generation_fast_(beamable_mm_beam_size=beam, need_attn=False)
        self.model, self.step = EnsembleModel([model]), step
        rows = batch_size * beam
        generator = torch.Generator().manual_seed(1)
        src = torch.randint(words.nspecial, len(words), (batch_size, source_length), generator=generator)
        src[:, -1] = words.eos()
        tokens = torch.randint(words.nspecial, len(words), (rows, step + 1), generator=generator)
        tokens[:, 0] = words.eos()
        self.tokens, self.order = tokens.to(device), torch.arange(rows, device=device)
        with torch.inference_mode():
            encoder_outs = self.model.forward_encoder({
                "src_tokens": src.to(device), "src_lengths": torch.full((batch_size,), source_length, device=device)})
            # each sentence's encoder output repeated for its hypotheses, as SequenceGenerator expands it
            self.encoder_outs = self.model.reorder_encoder_out(encoder_outs, self.order // beam)
        self.states = None

    @torch.inference_mode()
    def prepare(self):
        """Fresh states holding the steps before ``step``, each step after the first reordered first, as
        SequenceGenerator reorders them: what a search does once (the decoder lists its reordering modules at its
        first reorder, ``reorder_incremental_state_scripting``) is then done here, not in the timed step."""
        self.states = [{}]
        for position in range(1, self.step + 1):
            if position > 1:
                self.model.reorder_incremental_state(self.states, self.order)
            self.model.forward_decoder(self.tokens[:, :position], self.encoder_outs, self.states)

    @torch.inference_mode()
    def __call__(self):
        outs = self.model.reorder_encoder_out(self.encoder_outs, self.order)
        self.model.reorder_incremental_state(self.states, self.order)
        self.model.forward_decoder(self.tokens, outs, self.states)
