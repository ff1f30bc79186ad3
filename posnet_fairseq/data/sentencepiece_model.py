"""Learning and applying a SentencePiece model (the pip package ships no ``spm_train`` binary).

``posnet-spm`` (:mod:`posnet_fairseq.cli.spm`) is the shell's way in;
``posnet-compare`` calls :func:`train` and :func:`encode` directly.
"""


def train(inputs, model_prefix, vocab_size, model_type="bpe", character_coverage=1.0):
    """Learns ``model_prefix``.model/.vocab from the text files ``inputs``."""
    import sentencepiece as spm

    if vocab_size < 8:
        raise ValueError(f"--vocab-size {vocab_size}: must be at least 8")
    spm.SentencePieceTrainer.train(
        input=",".join(inputs),
        model_prefix=model_prefix,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        # A small corpus may have fewer pieces than asked for: take what exists.
        hard_vocab_limit=False,
        minloglevel=2,
    )


def encoder(model_file):
    """A function: one line of text -> its pieces joined by spaces."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_file=model_file)
    return lambda line: " ".join(processor.encode(line, out_type=str))
