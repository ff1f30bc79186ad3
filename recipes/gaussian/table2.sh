#!/usr/bin/env bash
# Hard-coded Gaussian paper (You, Sun & Iyyer, 2020), Table 2: BASE (Transformer), HC-SA
# (hard-coded self-attention: encoder heads at i-1/i+1, decoder at i-1/i), HC-ALL (+ hard-coded
# cross attention centred at gamma * i), SH-X (HC-SA with one learned cross-attention head, in
# the last decoder layer only). BLEU: sacreBLEU with the 'intl' tokenizer (the paper's
# signature). The paper marks no significance.
#
# Datasets: WMT16 En->Ro (newstest2016), WMT14 En->De (newstest2014) and WMT14 En->Fr trained on
# Europarl + Common Crawl only (full newstest2014), at the base size; IWSLT14 De->En at the
# paper's IWSLT size is our stand-in for its IWSLT16 En<->De (not the paper's). IWSLT16, IWSLT17
# En<->Ja and WMT16 Ro->En have no data recipe here: their columns hold the paper's figures only.
# Settings (the paper's, else the authors' code's, else ours; each said there):
# posnet_fairseq/table_runs/gaussian.py. In short: WMT base, 4000 warm-up updates to 7e-4, 100k updates
# of ~25k tokens; IWSLT 288/507/4 heads/5 layers, lr 3e-4 annealed linearly to 1e-5 over 100k
# updates with no warm-up, no label smoothing, dropout 0.1; beam 4, length penalty 0.6; the last
# 5 checkpoints averaged.
#
#   bash recipes/gaussian/table2.sh [--dry-run|--check|--micro] [--rows a,b] [--datasets a,b] ...
# Data: prepare-wmt16-en-ro.sh --paper gaussian (the authors' process_enro.sh/.py: Romanian without
# diacritics, references included; replace-unicode-punctuation; English dev/test from
# *-roen-ref.en.sgm; only empty pairs dropped, 612,422 lines before; 32000 merges),
# prepare-wmt14-en-de.sh --paper aan (its 32k BPE: the paper gives none, the code's bpe.32000
# agrees), prepare-wmt14-en-fr.sh --paper gaussian (32000 merges, the code's; ours, not the
# authors': valid = every 1,333th training pair, 3,939 of 5,251,875 before cleaning, where they
# validate on newstest2013, 3,000; Moses tokenisation and BPE learned on train, where they
# tokenise with spaCy and learn BPE on train, valid and test), prepare-iwslt14.sh.
source "$(dirname "$0")/../lib/common.sh"
recipe_init gaussian-table2 "$@"
run_table
