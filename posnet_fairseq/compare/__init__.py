"""The parts of ``posnet-compare`` (``posnet_fairseq/cli/compare.py``), one job each.

* :mod:`.data` - the corpus: synthetic with length controls, a user's raw text
  (SentencePiece + binarisation) or a data-bin; test lengths and buckets
* :mod:`.training` - budgets, fairseq-train side by side with resume, the progress line
* :mod:`.quality` - test translation, sacreBLEU BLEU/chrF with bootstrap CIs and
  paired significance, BLEU per source-length bucket
* :mod:`.cost` - parameters, training-step memory and throughput, decoding speed
* :mod:`.report` - ``results.md`` / ``results.csv``
* :mod:`.plots` - the PNG figures
"""
