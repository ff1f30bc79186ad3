import logging
import os
import sys

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
