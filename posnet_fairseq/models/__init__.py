"""The model and its named architectures.

Importing this package registers ``posnet_transformer`` first and then every
other module here (the base presets and one preset module per paper), so a new
preset file needs no edit here.
"""
import importlib
import pkgutil

from . import posnet_transformer  # noqa: F401  (the model must exist before its architectures)
from . import architectures  # noqa: F401,I001

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
