"""fairseq tasks of the plugin: importing this package registers them (``--task translation_concat``)."""
from . import translation_concat  # noqa: F401
