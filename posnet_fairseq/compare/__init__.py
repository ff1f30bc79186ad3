"""``posnet-compare`` (entry point: ``posnet_fairseq/cli/compare.py``), one job per module.

* :mod:`.options` - the command line and its checks
* :mod:`.run` - one run, step by step, each step skipped when done earlier
* :mod:`.steps` - the one way to skip finished work: a step's record of its settings, inputs and outputs
* :mod:`.devices` - where models train, translate and are timed (CPU threads or one GPU per model)
* :mod:`.data` - the corpus: synthetic with length controls, a user's raw text with its own or drawn
  valid/test splits (SentencePiece + binarisation) or a data-bin; test lengths and buckets
* :mod:`.seeds` - the seeds of a run, each (architecture, seed)'s name, mean ± sd over seeds
* :mod:`.recipe` - what every model shares, declared once: the budget (converge: patience with a cap), the
  optimiser, schedule and averaging, the fairseq-train command
* :mod:`.training` - fairseq-train side by side with resume, the progress line
* :mod:`.run_clock` - the clock of the progress line's ETA
* :mod:`.quality` - test translation, sacreBLEU BLEU/chrF with bootstrap CIs and
  paired significance, BLEU per source-length bucket
* :mod:`.verdict` - better / worse / no detectable difference against the baseline: a t-test over seeds and
  test sentences (:mod:`posnet_fairseq.evaluation.crossed`), Holm over the report's verdicts
* :mod:`.cost` - parameters, training-step memory and throughput, decoding speed
* :mod:`.mixing` - each model's mean attention weight by position offset
* :mod:`.records` - the quality and cost figures as typed records for the report; a training's outcome
* :mod:`.columns` - each column of results.md declared once: csv key, header, cell, legend, what the plots draw
* :mod:`.report` - ``results.md`` / ``results.csv``
* :mod:`.paths` - how results.md names a file: relative to the run, or by name outside it (a portable report)
* :mod:`.plots` - the PNG figures
"""
