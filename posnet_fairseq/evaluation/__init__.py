"""Scoring and tables (each module has a ``python -m`` entry point the recipes call).

* :mod:`.evaluate` - score one fairseq-generate output (sacreBLEU, tokenized BLEU, chrF, ...)
* :mod:`.generate_output` - the one reader of fairseq-generate's output
* :mod:`.bootstrap` - paired bootstrap resampling significance (the plugin's one significance test)
* :mod:`.hooks` - optional COMET / BLEURT scoring in a separate environment
* :mod:`.tables` - our results collected into the papers' tables (declared in ``table_runs/``)
"""
