import logging
import os
import signal
import sys

import pytest
import torch

# fairseq_testing lives beside the tests.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# fairseq logs at INFO on import (e.g. "Please install tensorboardX").
logging.getLogger("fairseq").setLevel(logging.WARNING)
# tests/run.sh runs two workers on two cores: one thread each avoids
# oversubscription, which slows small-tensor CPU work by orders of magnitude.
torch.set_num_threads(1)
# One SLURM cluster per pytest worker for every test file that uses it (a fixture imported into two
# test modules would be two session fixtures, two clusters of the same name).
from slurm_cluster import slurm_cluster  # noqa: E402,F401


@pytest.fixture
def ctrl_c():
    """Ctrl-C as an interactive shell delivers it (KeyboardInterrupt) for a test that signals its own process: a
    suite started as a shell's background job inherits SIGINT ignored, and Python then leaves it ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
