"""Corpus tools: the synthetic corpus, cleaning, tokenisation and corpus statistics.

* :mod:`.synth` - the embedded synthetic parallel corpus (``posnet-synth``), drawn from
  :mod:`.synth_grammar` (sentence structures, sampling, transfer rules) over :mod:`.synth_lexicon` (the words)
* :mod:`.clean_corpus` - length and length-ratio filter (clean-corpus-n.perl)
* :mod:`.text` - raw-text extraction and Moses tokenisation with sacremoses
* :mod:`.length_ratio` - gamma = mean source / mean target length of a binarized training set
* :mod:`.stats` - ``stats.json`` of a binarized corpus (pairs, vocab, lengths, gamma)
* :mod:`.bible` - verse-aligned Es-En pairs of two SWORD Bible modules, read and cleaned by :mod:`.sword_text`
"""
