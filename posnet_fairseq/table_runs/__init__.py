"""Running the papers' tables (``recipes/<paper>/*.sh``): what a table checks before it trains, and its CPU launcher.

* :mod:`.plancheck` - every planned fairseq-train command parses (architecture, mixers, flags)
* :mod:`.datasets` - each dataset a table reads is its paper's preparation (BPE merges, vocabulary,
  split sizes in ``stats.json``), else the command that prepares it
* :mod:`.launch` - N data-parallel CPU training processes on one machine (gloo)

The shell side is ``recipes/lib/common.sh``; which checkpoints a recipe averages is a rule of
``posnet_fairseq.cli.average_checkpoints``.
"""
