import logging
import os
import sys

# fairseq_testing lives beside the tests.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# fairseq logs at INFO on import (e.g. "Please install tensorboardX").
logging.getLogger("fairseq").setLevel(logging.WARNING)
