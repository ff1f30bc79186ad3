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
import logging
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

    import posnet_fairseq  # noqa: F401  (allow-lists fairseq's checkpoint classes)
    from fairseq import checkpoint_utils

    from .. import analysis

    # Importing fairseq may leave the root logger at DEBUG; matplotlib then logs every font lookup.
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    if not os.path.exists(args.checkpoint):
        parser.error(f"no checkpoint at {args.checkpoint}")
    state = checkpoint_utils.load_checkpoint_to_cpu(args.checkpoint)
    model_cfg = state["cfg"]["model"] if state.get("cfg") is not None else state.get("args")
    model_state = state["model"]
    if not args.no_plots:
        os.makedirs(args.out_dir, exist_ok=True)

    tables = analysis.position_tables(model_state, model_cfg, args.max_positions)
    if not tables:
        print("no position embeddings (--no-token-positional-embeddings)")
    for name, (kind, table) in tables.items():
        gram = analysis.position_gram(table)
        r2 = analysis.toeplitz_r2(gram)
        print(f"{name} ({kind}, {table.size(0)} x {table.size(1)}): Toeplitz R^2 = {r2:.4f}")
        if not args.no_plots:
            side = name.split(".")[0]
            path = os.path.join(args.out_dir, f"{side}_position_gram.png")
            analysis.plot_gram(gram, path, f"{name} ({kind})\nP = E E^T, Toeplitz R^2 = {r2:.3f}")
            print(f"wrote {path}")

    profiles = analysis.kernel_profiles(model_state, args.max_distance)
    if not profiles:
        print("no TISA scorers in this checkpoint")
    for prefix, values in profiles.items():
        peaks = analysis.visible_peaks(prefix, values, args.max_distance)
        print(f"{prefix}: {values.size(0)} heads, peak distance per head {peaks.tolist()}, "
              f"range [{float(values.min()):.3f}, {float(values.max()):.3f}]")
    if profiles and not args.no_plots:
        path = os.path.join(args.out_dir, "tisa_kernels.png")
        analysis.plot_kernels(profiles, path, args.max_distance)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
