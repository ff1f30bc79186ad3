"""Token mixers: one module per mechanism family, registered in registry.py, honouring the contract in base.py.

Importing this package imports every module in it, which registers each
mixer in ``MIXERS`` (a new mechanism file needs no edit here).
"""
import importlib
import pkgutil

from ..sites import SITES  # noqa: F401
from .registry import MIXERS, MixerContext, lookup_mixer, mixers_for_site, register_mixer  # noqa: F401

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
