"""Scoring and tables (each module has a ``python -m`` entry point the recipes call).

* :mod:`.evaluate` - score one fairseq-generate output (sacreBLEU, tokenized BLEU, chrF, ...)
* :mod:`.bootstrap` - paired bootstrap resampling significance
* :mod:`.hooks` - optional COMET / BLEURT scoring in a separate environment
* :mod:`.tables` - the papers' table layouts and the collection of results into them
"""
