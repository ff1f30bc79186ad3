"""Command-line flags of the plugin and their defaults.

fairseq parses model flags with ``argument_default=SUPPRESS`` and applies an
architecture function afterwards (also when a checkpoint is loaded), so flags
are declared here without defaults and :func:`set_defaults` fills in whatever
is missing. A mechanism module that has flags of its own registers them with
:func:`register_options`; the model picks them up without knowing them.
"""
from typing import Callable, List, Tuple

from .mixers.base import SITES, mixers_for_site

_PROVIDERS: List[Tuple[Callable, Callable]] = []


def register_options(add_args: Callable, set_defaults: Callable):
    """``add_args(parser)`` declares flags (no defaults); ``set_defaults(args)`` fills them."""
    _PROVIDERS.append((add_args, set_defaults))


def add_model_args(parser):
    choices = {site: ", ".join(mixers_for_site(site)) for site in SITES}
    parser.add_argument("--encoder-self-mixer", metavar="SPEC",
                        help=f"encoder self-attention mixer, one name or one per layer ({choices['encoder_self']})")
    parser.add_argument("--decoder-self-mixer", metavar="SPEC",
                        help=f"decoder self-attention mixer, one name or one per layer ({choices['decoder_self']})")
    parser.add_argument("--cross-mixer", metavar="SPEC",
                        help=f"decoder cross-attention mixer, one name or one per layer ({choices['cross']}); "
                        "'none' removes the sub-layer")
    parser.add_argument("--length-ratio", type=float, metavar="GAMMA",
                        help="length ratio gamma = mean source / mean target length for cross-attention "
                        "mixers; default: computed from the binarized training set and stored in the checkpoint")
    parser.add_argument("--no-encoder-ffn", action="store_true", help="remove the encoder feed-forward sub-layers (-FF)")
    parser.add_argument("--no-decoder-ffn", action="store_true", help="remove the decoder feed-forward sub-layers (-FF)")
    for add_args, _ in _PROVIDERS:
        add_args(parser)


def set_defaults(args):
    args.encoder_self_mixer = getattr(args, "encoder_self_mixer", "mha")
    args.decoder_self_mixer = getattr(args, "decoder_self_mixer", "mha")
    args.cross_mixer = getattr(args, "cross_mixer", "mha")
    args.length_ratio = getattr(args, "length_ratio", None)
    args.no_encoder_ffn = getattr(args, "no_encoder_ffn", False)
    args.no_decoder_ffn = getattr(args, "no_decoder_ffn", False)
    for _, provider_defaults in _PROVIDERS:
        provider_defaults(args)
