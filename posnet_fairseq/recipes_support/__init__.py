"""Python pieces of the shell recipes under ``recipes/`` (each module has a ``python -m`` entry point).

* :mod:`.clean_corpus` - length and length-ratio filter (clean-corpus-n.perl)
* :mod:`.text` - raw-text extraction and Moses tokenisation with sacremoses
* :mod:`.stats` - ``stats.json`` of a binarized corpus (pairs, vocab, lengths, gamma)
* :mod:`.evaluate` - score one fairseq-generate output (sacreBLEU, tokenized BLEU, chrF, ...)
* :mod:`.bootstrap` - paired bootstrap resampling significance
* :mod:`.hooks` - optional COMET / BLEURT scoring in a separate environment
* :mod:`.plancheck` - check that every planned fairseq-train command parses (arch, mixers, flags)
* :mod:`.avgrule` - which checkpoints to average (around the best one, or the last N)
* :mod:`.tables` - the papers' table layouts and the collection of results into them
"""
