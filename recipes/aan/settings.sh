# The AAN+ paper's settings (Zhang et al., section 6.2), shared by its tables: sourced after
# lib/common.sh. `aan_size base|deep|big` sets OPT for the rows that follow and SUFFIX, the
# size suffix of the architecture names (aan_plus_ner, aan_plus_ner_deep, aan_plus_ner_big).
#
# From the paper: base d = 512, FFN 2048, 8 heads; big d = 1024, FFN 4096, 16 heads, 16k
# warm-up updates, Adam beta2 0.998; deep = base with 12 encoder and 12 decoder layers; Adam
# (0.9, 0.98, eps 1e-8); ~25000 target tokens per batch; inverse square root schedule, 4000
# warm-up updates; label smoothing 0.1; attention and residual dropout 0.1; ~300k updates;
# the last five checkpoints, 5000 updates apart, averaged; beam 4, length penalty 0.6;
# alpha = beta = gamma = 0.1 (the presets' defaults); BPE with 32k merges; case-sensitive
# tokenized BLEU (multi-bleu.perl) and METEOR (meteor-1.5 -lower); decoding speed on
# newstest2014 with batches of 32 sentences.
# Not in the paper (our choices, said here): the peak learning rate, from Vaswani et al.'s
# d^-0.5 * warmup^-0.5 (7e-4 base and deep, 2.5e-4 big with its 16k warm-up); a joint
# vocabulary with all embeddings shared (the paper's 72.31M Transformer count implies about
# 55k embedding rows, so its vocabulary setup differs: compare parameter differences between
# rows, not totals); fairseq's length penalty (score / length^0.6) for the paper's (GNMT-style,
# as its codebase); post-norm layers (the paper's Eq. 15-18). Deep models: depth-scaled
# initialization (Zhang et al., 2019), as the paper's section 6.3.6 says: --ds-init, every
# weight matrix of layer l drawn from U(+-sqrt(6/(d_in+d_out))/sqrt(l)) (alpha 1: not given;
# posnet_fairseq/models/ds_init.py). METEOR: nltk's (see posnet_fairseq/evaluation/meteor.py),
# not meteor-1.5.
AAN_COMMON=(--share-all-embeddings --optimizer adam --adam-eps 1e-08 --clip-norm 0.0
            --lr-scheduler inverse_sqrt --warmup-init-lr 1e-07 --dropout 0.1 --attention-dropout 0.1
            --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-update 300000 --max-tokens 4096
            --save-interval-updates 5000 --keep-interval-updates 5 --no-epoch-checkpoints --seed 1)
TOKENS=25000; AVG="last 5"
GEN=(--beam 4 --lenpen 0.6 --batch-size 32)
EVAL=(--meteor)

aan_size() {
  case "$1" in
    base) SUFFIX=""; TRANSFORMER=(--arch posnet_transformer_base)
          OPT=(--lr 0.0007 --warmup-updates 4000 --adam-betas "(0.9,0.98)" "${AAN_COMMON[@]}") ;;
    deep) SUFFIX=_deep; TRANSFORMER=(--arch posnet_transformer_base --encoder-layers 12 --decoder-layers 12)
          OPT=(--ds-init --lr 0.0007 --warmup-updates 4000 --adam-betas "(0.9,0.98)" "${AAN_COMMON[@]}") ;;
    big) SUFFIX=_big; TRANSFORMER=(--arch posnet_transformer_big)
         OPT=(--lr 0.000247 --warmup-updates 16000 --adam-betas "(0.9,0.998)" "${AAN_COMMON[@]}") ;;
    *) die "aan_size $1: base, deep or big" ;;
  esac
}

# aan_rows DATASET: the rows of Tables 2, 4 and 7 at the current size: the Transformer, the
# paper's baselines SSRU (Kim et al., 2019) and linear attention (Katharopoulos et al., 2020),
# and AAN+ with each pattern, each in the decoder self-attention (row NAME$SUFFIX, architecture
# NAME$SUFFIX).
aan_rows() {
  local ds=$1 name
  row "transformer$SUFFIX" "$ds" "${TRANSFORMER[@]}" "${OPT[@]}"
  for name in ssru linear_attention aan_plus_avg aan_plus_far aan_plus_ner aan_plus_wet; do
    row "$name$SUFFIX" "$ds" --arch "$name$SUFFIX" "${OPT[@]}"
  done
}
