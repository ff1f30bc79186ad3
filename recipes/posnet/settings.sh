# The PosNet paper's settings (Schmidt & Di Gangi, section 5), shared by its tables: sourced
# after lib/common.sh. `posnet_size base|big|small` sets OPT, TOKENS, AVG and SIZE for the rows
# that follow, `posnet_model NAME` sets MODEL to the flags of one model of Tables 2 and 3.
#
# From the paper: Adam; 4000 warm-up updates; Base/Big as Vaswani et al. (2017), Small = Base
# with FFN 1024 and dropout 0.3 (the *_small presets: 8 heads, as Table 3's parameter counts
# need); updates: small 30k, base 150k, big 300k; ~16k target tokens per update
# (small), ~27k (base, big); sentences of at most 128 tokens; the final model averages the
# best checkpoint (by validation perplexity) and the ones after it, else the last ones:
# small 30 checkpoints 300 updates apart, base 7 x 1000, big 20 x 600; beam 12; rPosNet and
# LightConv with K = 16 (base, small) and K = 8 (big); rPosNet with learned position
# embeddings, every other model sinusoidal; En-De/En-Fr/De-En one joint vocabulary with all
# embeddings shared, En-Zh separate vocabularies with untied decoder embeddings (the
# parameter counts of Tables 2, 3 and 5 fit only these).
# Not in the paper (our choices, said here): the peak learning rate, from Vaswani et al.'s
# schedule d^-0.5 * min(step^-0.5, step * 4000^-1.5) the paper says it follows (7e-4 for
# d = 512, 4.9e-4 for d = 1024; fairseq's inverse_sqrt with that peak is the same curve);
# Adam betas (0.9, 0.98), label smoothing 0.1 and big dropout 0.3 (Vaswani et al.); no weight
# decay; post-norm layers (Vaswani et al.; AppTek's code is pre-norm); length-normalised beam
# scores (lenpen 1; AppTek's length_norm); --keep-interval-updates 3x the averaged count; the
# seed. "Best by perplexity": the lowest validation nll_loss (perplexity = 2^nll_loss, same
# order, finer rounding than fairseq's ppl).
PN_COMMON=(--optimizer adam --adam-betas "(0.9,0.98)" --clip-norm 0.0 --lr-scheduler inverse_sqrt
           --warmup-updates 4000 --warmup-init-lr 1e-07 --weight-decay 0.0
           --criterion label_smoothed_cross_entropy --label-smoothing 0.1
           --max-source-positions 128 --max-target-positions 128
           --best-checkpoint-metric nll_loss --no-epoch-checkpoints --seed 1)
GEN=(--beam 12 --lenpen 1.0 --batch-size 64)

posnet_size() {
  case "$1" in
    base) SIZE=base; TOKENS=27000; AVG="best 7"
          OPT=(--lr 0.0007 --dropout 0.1 --max-update 150000 --max-tokens 4500
               --save-interval-updates 1000 --keep-interval-updates 21 "${PN_COMMON[@]}") ;;
    big) SIZE=big; TOKENS=27000; AVG="best 20"
         OPT=(--lr 0.000494 --dropout 0.3 --max-update 300000 --max-tokens 3500
              --save-interval-updates 600 --keep-interval-updates 60 "${PN_COMMON[@]}") ;;
    small) SIZE=small; TOKENS=16000; AVG="best 30"
           OPT=(--lr 0.0007 --dropout 0.3 --max-update 30000 --max-tokens 4000
                --save-interval-updates 300 --keep-interval-updates 90 "${PN_COMMON[@]}") ;;
    *) die "posnet_size $1: base, big or small" ;;
  esac
  POSNET_SIZE="$1"
}

# AppTek's GaussianNet (the paper's baseline, Eq. 12): fixed Gaussians (sigma 1) centred at
# n-1, n, n+1 (encoder heads, cyclic) and n-1, n (decoder heads), biased value/output projections.
GAUSSIANNET=(--encoder-self-mixer hc_gaussian --decoder-self-mixer hc_gaussian
             --hc-encoder-offsets=-1,0,1 --hc-decoder-offsets=-1,0 --hc-bias)
# LightConv as the paper's Eq. 14: softmax-normalised kernel over +-K, on GLU(W_V x) (value
# projection D -> 2D, GLU, no gate, no norm): Table 5's "+ GLU [LightConv]" row and the
# "LightConv" rows of Tables 2 and 3 (their counts include the GLU's D^2 per layer).
LIGHTCONV_GLU=(--encoder-self-gating on --decoder-self-gating on --gating-value-act glu --gating-gate-act none
               --gating-no-value-norm)

# posnet_model NAME: MODEL = the flags of NAME at the current size (Tables 2 and 3).
posnet_model() {
  local k=()
  [ "$POSNET_SIZE" = big ] && k=(--lightconv-max-relative 8)
  case "$1" in
    transformer) MODEL=(--arch "posnet_transformer_$SIZE") ;;
    shaw) MODEL=(--arch "shaw_transformer_$SIZE") ;;
    relattn) MODEL=(--arch "relattn_transformer_$SIZE") ;;
    fouriernet) MODEL=(--arch "fouriernet_transformer_$SIZE") ;;
    gaussiannet) MODEL=(--arch "posnet_transformer_$SIZE" "${GAUSSIANNET[@]}") ;;
    linearnet) MODEL=(--arch "linearnet_transformer_$SIZE") ;;
    glinearnet) MODEL=(--arch "glinearnet_transformer_$SIZE") ;;
    lightconv) MODEL=(--arch "lightconv_apptek_transformer_$SIZE" "${LIGHTCONV_GLU[@]}" "${k[@]+"${k[@]}"}") ;;
    aposnet) MODEL=(--arch "aposnet_transformer_$SIZE") ;;
    rposnet) MODEL=(--arch "rposnet_transformer_$SIZE") ;;
    *) die "posnet_model $1: unknown model" ;;
  esac
}

# Embeddings: one joint vocabulary shared by all embeddings, except En-Zh (separate, untied).
posnet_embeddings() {
  case "$1" in wmt18_en_zh) EMB=() ;; *) EMB=(--share-all-embeddings) ;; esac
}
POSNET_ROWS=(transformer shaw fouriernet gaussiannet linearnet lightconv glinearnet aposnet rposnet)
