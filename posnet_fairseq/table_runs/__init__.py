"""The papers' tables (``recipes/<paper>/*.sh``): each declared once, what a table checks before it trains, and
its CPU launcher.

* :mod:`.table` - the records a table is declared with (columns, rows, runs, settings, the paper's figures)
* :mod:`.posnet`, :mod:`.aan`, :mod:`.gaussian`, :mod:`.tisa` - each paper's tables
* :mod:`.papers` - every table by its recipe's name
* :mod:`.rows` - a table's rows as the shell statements the recipes evaluate
* :mod:`.plancheck` - every planned fairseq-train command parses (architecture, mixers, flags)
* :mod:`.datasets` - each dataset a table reads is its paper's preparation (BPE merges, vocabulary,
  split sizes in ``stats.json``), else the command that prepares it
* :mod:`.launch` - N data-parallel CPU training processes on one machine (gloo)

The shell side is ``recipes/lib/common.sh``; which checkpoints a recipe averages is a rule of
``posnet_fairseq.cli.average_checkpoints``.
"""
