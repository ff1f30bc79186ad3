"""Tooling of the shell recipes under ``recipes/`` (each module has a ``python -m`` entry point).

* :mod:`.launch` - N data-parallel CPU training processes on one machine (gloo)
* :mod:`.plancheck` - check that every planned fairseq-train command parses (arch, mixers, flags)

Which checkpoints a recipe averages is a rule of ``posnet_fairseq.cli.average_checkpoints``.
"""
