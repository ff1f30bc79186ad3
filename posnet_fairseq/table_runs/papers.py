"""Every paper table by its recipe's name (``posnet-table2``, ``aan-figure8``, ...): where the recipes
(:mod:`.rows`), the result tables (``evaluation/tables.py``) and the tests look a table up."""
from . import aan, gaussian, posnet, tisa

TABLES = {table.name: table for paper in (posnet, aan, gaussian, tisa) for table in paper.TABLES}
