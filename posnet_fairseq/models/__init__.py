"""The model and its named architectures (``architectures.py``: the sizes, and a row per declared family and size)."""
from . import posnet_transformer  # noqa: F401  (the model must exist before its architectures)
from . import architectures  # noqa: F401,I001
