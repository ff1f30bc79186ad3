"""``posnet-analyze CHECKPOINT``: Toeplitzness of position embeddings and TISA kernel plots.

Prints, for each position-embedding table of the checkpoint (learned with
``--encoder-learned-pos``/``--decoder-learned-pos``, else fairseq's sinusoidal
table), the R^2 of the best Toeplitz fit of P = E_P E_P^T over the first
``--max-positions`` positions, and writes into ``--out-dir``:

* ``{encoder,decoder}_position_gram.png`` -- P as a heat map;
* ``tisa_kernels.png`` -- f_h(k) of every TISA head and layer (if any).

Wennberg & Henter (2021), Section 3. The checkpoint is read with fairseq's
loader under torch's safe unpickler (classes allow-listed by posnet_fairseq).
"""
import argparse
import os


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].split(": ", 1)[1])
    parser.add_argument("checkpoint", help="a fairseq checkpoint (checkpoint_best.pt, ...)")
    parser.add_argument("--out-dir", default=".", help="where the PNG files go (default: current directory)")
    parser.add_argument("--max-positions", type=int, default=128,
                        help="positions of each embedding table to analyse (default 128)")
    parser.add_argument("--max-distance", type=int, default=20,
                        help="TISA kernels are plotted for k = -K..K (default 20)")
    parser.add_argument("--no-plots", action="store_true", help="print the numbers only")
    args = parser.parse_args(argv)
    if args.max_positions < 2:
        parser.error(f"--max-positions {args.max_positions}: need at least 2 positions")
    if args.max_distance < 1:
        parser.error(f"--max-distance {args.max_distance}: must be at least 1")

    from .. import translation_invariance

    if not os.path.exists(args.checkpoint):
        parser.error(f"no checkpoint at {args.checkpoint}")
    lines, _ = translation_invariance.analyse_checkpoint(args.checkpoint, None if args.no_plots else args.out_dir,
                                                         args.max_positions, args.max_distance)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
