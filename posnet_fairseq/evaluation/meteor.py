"""METEOR beside BLEU, as the AAN+ paper reports it, computed offline with nltk's implementation.

nltk's ``meteor_score`` (Banerjee & Lavie 2005; Lavie & Agarwal 2007): unigrams
of hypothesis and reference are aligned in stages (exact, stem, WordNet
synonym), F_mean = P R / (alpha P + (1 - alpha) R) with alpha 0.9, times
(1 - gamma (chunks / matches)^beta) with beta 3 and gamma 0.5; lowercased
first (the AAN+ paper runs METEOR with ``-lower``). One score per sentence;
the corpus score here is their mean, reported times 100 as the paper does.

Not the AAN+ paper's METEOR: the paper ran meteor-1.5 (METEOR Universal,
Denkowski & Lavie 2014, in Java), with language-specific parameters,
paraphrase tables and corpus-level statistics. Figures from here are not
comparable in absolute terms with the paper's; rows of one table scored
alike compare with each other.

Offline: nltk is a PyPI package (``pip install nltk``); when it is missing the
result says so (``available: false``) and nothing fails. Stemming uses the
Snowball stemmer of the target language, which needs no data. WordNet
synonyms need nltk's WordNet corpus, which nothing here downloads: they are
used when the corpus is already on nltk's data path and the target language
is English (meteor-1.5 has no WordNet synonyms for other languages either);
otherwise that stage is off, and the signature says which stages ran.
"""

# Target language code -> nltk's Snowball stemmer name.
SNOWBALL = {"en": "english", "de": "german", "fr": "french", "es": "spanish", "it": "italian", "pt": "portuguese",
            "nl": "dutch", "ro": "romanian", "ru": "russian", "sv": "swedish", "da": "danish", "fi": "finnish",
            "hu": "hungarian", "no": "norwegian"}


class _NoSynonyms:
    """Stands in for nltk's WordNet reader: no synonym matches."""

    @staticmethod
    def synsets(*args, **kwargs):
        return []


def _unavailable(reason):
    print(f"METEOR: unavailable: {reason}")
    return {"available": False, "reason": reason}


def _wordnet():
    """nltk's WordNet reader when its corpus is installed (never downloaded here), else None."""
    import nltk

    try:
        nltk.data.find("corpora/wordnet")
    except LookupError:
        try:
            nltk.data.find("corpora/wordnet.zip")
        except LookupError:
            return None
    from nltk.corpus import wordnet

    return wordnet


def meteor(hypotheses, references, lang):
    """{"score": mean sentence METEOR x 100, "scores": per sentence x 100, "signature": ...} of tokenized
    ``hypotheses`` against tokenized ``references`` (one each per line), or why it cannot run."""
    if len(hypotheses) != len(references):
        raise ValueError(f"METEOR: {len(hypotheses)} hypotheses but {len(references)} references")
    if lang not in SNOWBALL:
        return _unavailable(f"no Snowball stemmer for target language {lang!r} (nltk has {sorted(SNOWBALL)})")
    try:
        from nltk.stem.snowball import SnowballStemmer
        from nltk.translate.meteor_score import single_meteor_score
    except ImportError as err:
        return _unavailable(f"nltk is not installed (pip install nltk): {err}")
    wordnet = _wordnet() if lang == "en" else None
    stemmer = SnowballStemmer(SNOWBALL[lang])
    scores = [100.0 * single_meteor_score(ref.split(), hyp.split(), stemmer=stemmer,
                                          wordnet=wordnet if wordnet is not None else _NoSynonyms())
              for hyp, ref in zip(hypotheses, references)]
    import nltk

    stages = "exact+stem" + ("+wordnet" if wordnet is not None else "")
    signature = (f"nltk {nltk.__version__} meteor_score|alpha:0.9|beta:3|gamma:0.5|lower|{stages}|"
                 f"stem:snowball-{SNOWBALL[lang]}|mean of sentence scores (not meteor-1.5)")
    return {"available": True, "score": round(sum(scores) / max(len(scores), 1), 2), "scores": scores,
            "signature": signature}
