"""Command-line tools of the plugin (console scripts in setup.py)."""
