"""The model and its named architectures.

Importing this package registers ``posnet_transformer`` first, then the sizes
and plain Transformer rows (``architectures.py``), then every other module
here: one ``<mixer>_architectures.py`` per mixer module with presets, so a new
preset file needs no edit here.
"""
import importlib
import pkgutil

from . import posnet_transformer  # noqa: F401  (the model must exist before its architectures)
from . import architectures  # noqa: F401,I001

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
