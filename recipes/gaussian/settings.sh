# The hard-coded Gaussian paper's settings (You, Sun & Iyyer, 2020), shared by its tables: sourced
# after lib/common.sh. `hc_size wmt|iwslt` sets OPT, TOKENS, AVG, GEN and EVAL for the rows that
# follow, and TRANSFORMER, the flags of its BASE row. Each value says where it comes from: the
# paper where it speaks, else the authors' code (fallcat/stupidNMT at 2d5111a: its README's
# commands, args.py's defaults, actions/train.py), else ours.
#
# wmt (the paper's "larger datasets": WMT14 En-De, En-Fr, WMT16 En-Ro; section 4.2):
#   paper:  the Transformer base (512 / 2048 / 8 heads / 6 layers), 4000 warm-up updates.
#   code:   peak lr 512^-0.5 * 4000^-0.5 = 7e-4 (args.py: base lr embedding_size^-0.5, train.py:
#           the warm-up schedule), Adam (0.9, 0.98, eps 1e-9) (train.py), dropout 0.1 and label
#           smoothing 0.1 (args.py), 100k updates (args.py --max-steps), ~50.8k source + target
#           tokens per update (README: 8 GPUs x 3175 x 2), i.e. ~25k target tokens; the last 5
#           checkpoints averaged (README's translate command; args.py keeps 5); beam 4, length
#           penalty 0.6 (args.py); output up to the source length + 50 (README: --length-basis
#           input_lens, --max-decode-length 50).
#   ours:   checkpoints every 1000 updates (the code saves every 20 minutes of wall time);
#           joint vocabularies with all embeddings shared; fairseq's length penalty.
# iwslt (IWSLT16 En-De, IWSLT17 En-Ja; section 4.2):
#   paper:  288 / 507 / 4 heads / 5 layers (the *_iwslt presets), lr 3e-4 with a linear schedule.
#   code:   the schedule anneals linearly from 3e-4 to 1e-5 over the run with no warm-up
#           (train.py LinearLRSchedule, args.py --final-learning-rate 1e-5), 100k updates
#           (args.py), label smoothing 0 (README's IWSLT commands), dropout 0.1 (args.py),
#           Adam (0.9, 0.98, eps 1e-9), 6000 source + target tokens per batch on one GPU
#           (README), i.e. ~3000 target tokens; 5 checkpoints averaged, beam 4, length penalty
#           0.6, output up to the source length + 50 (as wmt).
#   ours:   checkpoints every 1000 updates; decoder input and output embeddings shared.
# Both: sigma 1 and the heads' offsets (the presets); gamma = mean source / mean target training
# length (computed by the model); BLEU by sacreBLEU with the 'intl' tokenizer (footnote 13).
HC_COMMON=(--optimizer adam --adam-betas "(0.9,0.98)" --adam-eps 1e-09 --clip-norm 0.0 --dropout 0.1
           --criterion label_smoothed_cross_entropy --max-update 100000 --save-interval-updates 1000
           --keep-interval-updates 5 --no-epoch-checkpoints --seed 1)
EVAL=(--sacrebleu-tokenize intl)
AVG="last 5"
GEN=(--beam 4 --lenpen 0.6 --max-len-a 1 --max-len-b 50 --batch-size 64)
# The IWSLT size as flags, for the rows that have no *_iwslt preset (the BASE Transformer).
IWSLT_SIZE=(--encoder-embed-dim 288 --decoder-embed-dim 288 --encoder-ffn-embed-dim 507 --decoder-ffn-embed-dim 507
            --encoder-attention-heads 4 --decoder-attention-heads 4 --encoder-layers 5 --decoder-layers 5)

hc_size() {
  case "$1" in
    wmt) SUFFIX=""; TOKENS=25000; TRANSFORMER=(--arch posnet_transformer_base)
         OPT=(--share-all-embeddings --lr 0.0007 --lr-scheduler inverse_sqrt --warmup-updates 4000
              --warmup-init-lr 1e-07 --label-smoothing 0.1 --max-tokens 4096 "${HC_COMMON[@]}") ;;
    iwslt) SUFFIX=_iwslt; TOKENS=3000; TRANSFORMER=(--arch posnet_transformer_base "${IWSLT_SIZE[@]}")
           OPT=(--share-decoder-input-output-embed --lr 0.0003 --lr-scheduler polynomial_decay --power 1.0
                --warmup-updates 0 --end-learning-rate 1e-05 --total-num-update 100000 --label-smoothing 0.0
                --max-tokens 3000 "${HC_COMMON[@]}") ;;
    *) die "hc_size $1: wmt or iwslt" ;;
  esac
}
