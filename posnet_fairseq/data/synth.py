"""Deterministic synthetic parallel corpus: a toy English-like source language
and an invented verb-final target language.

The corpus exists so that the quick start and the end-to-end tests can train
and score a translation model without downloading anything.  Every target
sentence is a deterministic function of its source sentence, so a good model
can approach BLEU 100, while each transfer rule below needs a particular
ability from the token mixer (local reordering, content-dependent agreement,
long-distance movement).  Everything is drawn from ``random.Random(seed)``:
the same seed and flags give byte-identical files.

Command line::

    python -m posnet_fairseq.data.synth --out-dir data/synth [--seed 1] \\
        [--train 20000] [--valid 500] [--test 500] [--max-len 60] \\
        [--test-max-len 50 [--test-buckets 5]] [--src-lang src] [--tgt-lang tgt]

writes ``DIR/{train,valid,test}.{src,tgt}``: one sentence per line, lowercase,
space-tokenised, ending in a "." token.

Lexicon (the tables ``NOUNS``, ``TRANSITIVE_VERBS`` ... below)
---------------------------------------------------------------
* 48 nouns.  Source: singular ``dog``, plural ``dogs``.  Each noun lexeme has
  a fixed, arbitrary agreement class, written as its marker vowel: o, a or e
  (16 nouns each).  The class cannot be guessed from the source spelling; a
  model has to learn it per noun.  Target: a stem (``dog`` -> ``nuzon``), the
  plural adds ``-<vowel>s`` (o-class ``nuzon`` -> ``nuzonos``).
* 20 transitive and 10 intransitive verbs.  Source: 3rd person singular
  ``sees``, plural ``see``.  Target: one invariant stem (``see`` -> ``libbu``)
  followed by a separate agreement token (below).
* 24 adjectives, uninflected on both sides (``big`` -> ``geva``).
* Function words: determiners ``the`` (definite), ``a`` (indefinite singular),
  ``some`` (indefinite plural), with no "a"/"an" alternation; noun-modifying prepositions ``of with
  without``; adverbial prepositions ``in on near under behind beside``;
  relative ``that``; conjunctions ``and but``.

All source word forms are distinct from each other and from every target
word, so nothing can be solved by copying.

Source grammar
--------------
Rules with their sampling probabilities (see ``sample_sentence``)::

    S      -> CL (CONJ CL)* "."      1, 2 or 3 clauses: p = .65 / .27 / .08
    CL     -> NPf VT NPf ADVPP?      transitive with p = .65
            | NPf VI ADVPP?          ADVPP with p = .25
    NPf    -> NPm RC?                RC with p = .12
    NPm    -> NPs (PREPN NPs)?       noun-modifying PP with p = .12
    NPs    -> DET ADJ{0,2} N         0 / 1 / 2 distinct adjectives: p = .60 / .30 / .10
    RC     -> "that" VT NPm          subject relative (the head is its subject), p = .5
            | "that" NPm VT          object relative (the head is its object)
    ADVPP  -> PREPA NPm

Each noun is plural with p = .3 and definite with p = .6; the determiner
follows (``the``/``a``/``some``).  A verb agrees in number with its subject:
the clause subject, the head noun of a subject relative, or the NPm inside an
object relative.  Word classes have disjoint word forms and every optional
constituent starts with a word of its own class (PREPN, PREPA, "that", CONJ),
so the grammar is LL(1): a sentence has exactly one parse, and its
translation is well defined.  Sentences whose source or target exceed
``max_len`` tokens are redrawn; test, valid and train sentences are distinct.
With the defaults, train sentences average about 12.9 source and 15.8 target
tokens (src/tgt ratio 0.82); about 2.5% of sources are longer than 30 tokens.

Length generalisation: ``--test-max-len N`` (``write_corpus(test_max_len=N)``)
keeps ``--max-len`` for train and valid only and makes the test set
length-stratified: the same number of pairs in each of ``--test-buckets``
equal-width source-length buckets up to N tokens.  To reach long buckets
cheaply, test sentences get a clause count drawn uniformly up to N / 4 (the
grammar draws at most three): longer test sentences hold more coordinated
clauses, each drawn from the same grammar.

Transfer rules (source -> target)
---------------------------------
1. Lexicon: every content word and function word is replaced by its fixed
   translation (``and`` -> ``edo``, ``but`` -> ``ama``, ``that`` -> ``ki``).
2. Determiner agreement (content-dependent): the target determiner is
   ``k`` (definite) or ``m`` (indefinite), then the noun's class vowel, then
   ``s`` if plural.  The source determiner only says definite/indefinite
   (and ``a``/``some`` number); the vowel must be read off the noun, which in
   the source can sit two adjectives away::

       the dog  -> ko nuzon          a window  -> mo purak
       the dogs -> kos nuzonos       some hats -> mas nisuras

3. Noun-adjective order (local reordering): adjectives follow the noun, in
   mirror order; a target noun phrase is ``DET' N' ADJ'* [PP'] [RC']``::

       the big red dog -> ko nuzon keta geva

4. Postpositions (reordering over a phrase): ``PREP NP`` -> ``NP' POST``::

       with the hat -> ka nisur kom          in a house -> ma sebul ini

5. Verb-final clauses (long-range movement): in every clause, relative clauses
   included, the verb moves to the end of its clause, past the object and any
   adverbial PP.  The direct object gets the particle ``nu`` after it (so the
   target is longer than the source)::

       the dog sees a cat in the house .
       -> ko nuzon me bolor nu ka sebul ini libbu ro .

6. Verb agreement (content-dependent, long-range): right after the verb stem
   comes an agreement token ``r`` + the class vowel of its subject + ``s`` if
   plural (ro ra re ros ras res).  The subject may be far away in the
   target: at the start of the clause, or, for a subject relative clause,
   the head noun before ``ki``::

       the dogs that see the hat sleep .
       -> kos nuzonos ki ka nisur nu libbu ros gefni ros .
       the hat that the dog sees falls .
       -> ka nisur ki ko nuzon libbu ro subse ra .

``render`` turns an explicit ``Sentence`` structure into a (source, target)
pair, so each rule can be checked on a constructed example.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
from dataclasses import dataclass
from typing import Optional, Sequence

# --- lexicon -----------------------------------------------------------------

# source singular noun -> (target stem, agreement class vowel)
NOUNS = {
    "dog": ("nuzon", "o"), "cat": ("bolor", "e"), "bird": ("posuv", "o"),
    "horse": ("fanif", "e"), "farmer": ("duvar", "a"), "teacher": ("mosus", "e"),
    "student": ("fubud", "e"), "doctor": ("bager", "a"), "king": ("tugin", "e"),
    "queen": ("zepes", "e"), "girl": ("koban", "a"), "boy": ("simuz", "e"),
    "friend": ("dilep", "e"), "baker": ("kaduv", "e"), "singer": ("dovim", "a"),
    "pilot": ("dazag", "a"), "soldier": ("ganot", "a"), "sailor": ("lomuk", "a"),
    "neighbor": ("gilak", "o"), "stranger": ("lamaf", "o"), "robot": ("gaban", "o"),
    "monkey": ("vofug", "a"), "rabbit": ("nugem", "o"), "lion": ("sodek", "o"),
    "tiger": ("gakuk", "o"), "snake": ("befoz", "o"), "frog": ("rudaf", "a"),
    "duck": ("gokav", "e"), "goat": ("rizim", "o"), "cow": ("dader", "e"),
    "house": ("sebul", "a"), "garden": ("luner", "o"), "river": ("nufof", "a"),
    "forest": ("sekez", "e"), "mountain": ("retef", "a"), "castle": ("tuzon", "a"),
    "tower": ("ramad", "o"), "bridge": ("dapig", "o"), "village": ("tokoz", "o"),
    "market": ("rokuf", "o"), "table": ("tafen", "a"), "window": ("purak", "o"),
    "door": ("getad", "e"), "book": ("koneb", "e"), "letter": ("bekip", "e"),
    "hat": ("nisur", "a"), "boat": ("redif", "a"), "flower": ("fuban", "e"),
}

# source base form (plural agreement) -> target stem
TRANSITIVE_VERBS = {
    "see": "libbu", "like": "sandi", "find": "leddo", "follow": "pitbe",
    "help": "vildo", "visit": "dovbo", "paint": "rarso", "call": "mubra",
    "know": "dasdi", "want": "mimtu", "love": "nonzu", "hate": "duvpa",
    "build": "kudna", "pull": "ganvu", "hold": "sokbi", "keep": "kesre",
    "meet": "pevlo", "draw": "nelmi", "open": "govve", "clean": "gogri",
}
INTRANSITIVE_VERBS = {
    "sleep": "gefni", "run": "zatdi", "sing": "zedno", "dance": "kezmo",
    "swim": "sunsi", "jump": "tunla", "laugh": "zakzu", "wait": "birli",
    "fall": "subse", "sit": "mogbi",
}
ADJECTIVES = {
    "big": "geva", "small": "sana", "old": "susi", "young": "dego",
    "red": "keta", "blue": "vopa", "green": "feki", "happy": "pufa",
    "sad": "veme", "tall": "doti", "short": "fone", "quiet": "samu",
    "loud": "ruvi", "brave": "nise", "lazy": "dage", "clever": "maku",
    "strange": "vika", "hungry": "luda", "angry": "nipo", "tired": "vina",
    "rich": "gama", "poor": "fule", "dark": "nepu", "bright": "zonu",
}
# Prepositions are split by attachment so that attachment is never ambiguous.
NP_PREPOSITIONS = {"of": "ul", "with": "kom", "without": "nikom"}
ADV_PREPOSITIONS = {
    "in": "ini", "on": "supa", "near": "pres", "under": "sota",
    "behind": "dopo", "beside": "lado",
}
CONJUNCTIONS = {"and": "edo", "but": "ama"}
RELATIVE = ("that", "ki")
OBJECT_PARTICLE = "nu"
END = "."

# A clause with an intransitive verb and a bare noun is 4 source / 5 target
# tokens; below 10 the length filter would reject nearly every draw.
MIN_MAX_LEN = 10

_NOUN_LIST = tuple(NOUNS)
_VT_LIST = tuple(TRANSITIVE_VERBS)
_VI_LIST = tuple(INTRANSITIVE_VERBS)
_ADJ_LIST = tuple(ADJECTIVES)
_NP_PREP_LIST = tuple(NP_PREPOSITIONS)
_ADV_PREP_LIST = tuple(ADV_PREPOSITIONS)
_CONJ_LIST = tuple(CONJUNCTIONS)

# --- sentence structure --------------------------------------------------------


@dataclass(frozen=True)
class NP:
    """Noun phrase: ``noun`` is the source singular lemma, e.g. ``NP("dog")``."""

    noun: str
    plural: bool = False
    definite: bool = True
    adjectives: tuple[str, ...] = ()
    pp: Optional["PP"] = None
    rc: Optional["RelClause"] = None


@dataclass(frozen=True)
class PP:
    """Prepositional phrase; ``prep`` decides attachment (NP or clause)."""

    prep: str
    np: NP


@dataclass(frozen=True)
class RelClause:
    """``that VERB np`` if ``subject_gap`` (head is the subject), else ``that np VERB``."""

    verb: str
    np: NP
    subject_gap: bool = True


@dataclass(frozen=True)
class Clause:
    subject: NP
    verb: str
    obj: Optional[NP] = None
    pp: Optional[PP] = None


@dataclass(frozen=True)
class Sentence:
    """``clauses[0] conjunctions[0] clauses[1] ... .``"""

    clauses: tuple[Clause, ...]
    conjunctions: tuple[str, ...] = ()


# --- sampling --------------------------------------------------------------------

P_CLAUSES = (0.65, 0.27, 0.08)
P_TRANSITIVE = 0.65
P_ADV_PP = 0.25
P_RC = 0.12
P_SUBJECT_GAP = 0.5
P_NP_PP = 0.12
P_ADJECTIVES = (0.60, 0.30, 0.10)
P_PLURAL = 0.3
P_DEFINITE = 0.6


def _sample_np(rng: random.Random, allow_pp: bool, allow_rc: bool) -> NP:
    # (allow_pp, allow_rc) = (False, False) / (True, False) / (True, True)
    # draws the grammar's NPs / NPm / NPf.
    noun = rng.choice(_NOUN_LIST)
    plural = rng.random() < P_PLURAL
    definite = rng.random() < P_DEFINITE
    n_adj = rng.choices(range(len(P_ADJECTIVES)), weights=P_ADJECTIVES)[0]
    adjectives = tuple(rng.sample(_ADJ_LIST, n_adj))
    pp = None
    if allow_pp and rng.random() < P_NP_PP:
        pp = PP(rng.choice(_NP_PREP_LIST), _sample_np(rng, False, False))
    rc = None
    if allow_rc and rng.random() < P_RC:
        verb = rng.choice(_VT_LIST)
        rc = RelClause(verb, _sample_np(rng, True, False), rng.random() < P_SUBJECT_GAP)
    return NP(noun, plural, definite, adjectives, pp, rc)


def _sample_clause(rng: random.Random) -> Clause:
    subject = _sample_np(rng, True, True)
    if rng.random() < P_TRANSITIVE:
        verb, obj = rng.choice(_VT_LIST), _sample_np(rng, True, True)
    else:
        verb, obj = rng.choice(_VI_LIST), None
    pp = None
    if rng.random() < P_ADV_PP:
        pp = PP(rng.choice(_ADV_PREP_LIST), _sample_np(rng, True, False))
    return Clause(subject, verb, obj, pp)


def sample_sentence(rng: random.Random, clauses: Optional[int] = None) -> Sentence:
    """Draw one sentence structure from the grammar in the module docstring.

    ``clauses`` fixes the number of coordinated clauses instead of drawing it
    from ``P_CLAUSES``: the length-stratified test sets use it to reach
    sentences longer than the grammar's three clauses usually give.
    """
    if clauses is not None and clauses < 1:
        raise ValueError(f"clauses must be at least 1, got {clauses}")
    n_clauses = clauses or rng.choices(range(1, len(P_CLAUSES) + 1), weights=P_CLAUSES)[0]
    clauses = tuple(_sample_clause(rng) for _ in range(n_clauses))
    conjunctions = tuple(rng.choice(_CONJ_LIST) for _ in range(n_clauses - 1))
    return Sentence(clauses, conjunctions)


# --- rendering -----------------------------------------------------------------


def target_determiner(np: NP) -> str:
    """Rule 2: k/m (definiteness) + the noun's class vowel + s (plural)."""
    return ("k" if np.definite else "m") + NOUNS[np.noun][1] + ("s" if np.plural else "")


def agreement_marker(subject: NP) -> str:
    """Rule 6: the token after a target verb, r + subject class vowel + s (plural)."""
    return "r" + NOUNS[subject.noun][1] + ("s" if subject.plural else "")


def _source_verb(verb: str, subject: NP) -> str:
    return verb if subject.plural else verb + "s"


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _render_np(np: NP, allow_pp: bool, allow_rc: bool) -> tuple[list[str], list[str]]:
    _check(np.noun in NOUNS, f"unknown noun {np.noun!r}")
    _check(len(np.adjectives) <= 2 and len(set(np.adjectives)) == len(np.adjectives),
           f"at most two distinct adjectives allowed, got {np.adjectives}")
    for adj in np.adjectives:
        _check(adj in ADJECTIVES, f"unknown adjective {adj!r}")
    _check(np.pp is None or allow_pp, f"no PP allowed inside this NP ({np.noun!r})")
    _check(np.rc is None or allow_rc, f"no relative clause allowed inside this NP ({np.noun!r})")

    stem, vowel = NOUNS[np.noun]
    det = "the" if np.definite else ("some" if np.plural else "a")
    src = [det, *np.adjectives, np.noun + "s" if np.plural else np.noun]
    tgt = [target_determiner(np), stem + vowel + "s" if np.plural else stem]
    tgt += [ADJECTIVES[adj] for adj in reversed(np.adjectives)]
    if np.pp is not None:
        _check(np.pp.prep in NP_PREPOSITIONS, f"{np.pp.prep!r} cannot modify a noun")
        pp_src, pp_tgt = _render_np(np.pp.np, False, False)
        src += [np.pp.prep, *pp_src]
        tgt += [*pp_tgt, NP_PREPOSITIONS[np.pp.prep]]
    if np.rc is not None:
        rc = np.rc
        _check(rc.verb in TRANSITIVE_VERBS, f"relative clause needs a transitive verb, got {rc.verb!r}")
        inner_src, inner_tgt = _render_np(rc.np, True, False)
        verb_tgt = TRANSITIVE_VERBS[rc.verb]
        if rc.subject_gap:
            src += [RELATIVE[0], _source_verb(rc.verb, np), *inner_src]
            tgt += [RELATIVE[1], *inner_tgt, OBJECT_PARTICLE, verb_tgt, agreement_marker(np)]
        else:
            src += [RELATIVE[0], *inner_src, _source_verb(rc.verb, rc.np)]
            tgt += [RELATIVE[1], *inner_tgt, verb_tgt, agreement_marker(rc.np)]
    return src, tgt


def _render_clause(clause: Clause) -> tuple[list[str], list[str]]:
    transitive = clause.obj is not None
    lexicon = TRANSITIVE_VERBS if transitive else INTRANSITIVE_VERBS
    _check(clause.verb in lexicon,
           f"{clause.verb!r} is not a {'transitive' if transitive else 'intransitive'} verb")
    src, tgt = _render_np(clause.subject, True, True)
    src.append(_source_verb(clause.verb, clause.subject))
    if transitive:
        obj_src, obj_tgt = _render_np(clause.obj, True, True)
        src += obj_src
        tgt += [*obj_tgt, OBJECT_PARTICLE]
    if clause.pp is not None:
        _check(clause.pp.prep in ADV_PREPOSITIONS, f"{clause.pp.prep!r} cannot modify a clause")
        pp_src, pp_tgt = _render_np(clause.pp.np, True, False)
        src += [clause.pp.prep, *pp_src]
        tgt += [*pp_tgt, ADV_PREPOSITIONS[clause.pp.prep]]
    tgt += [lexicon[clause.verb], agreement_marker(clause.subject)]
    return src, tgt


def render(sentence: Sentence) -> tuple[str, str]:
    """Return the (source, target) pair for a sentence structure.

    Raises ValueError if the structure is outside the grammar (unknown word,
    wrong verb or preposition class, forbidden nesting): such sentences could
    be ambiguous and are never generated.
    """
    _check(len(sentence.clauses) >= 1, "a sentence needs at least one clause")
    _check(len(sentence.conjunctions) == len(sentence.clauses) - 1,
           "need exactly one conjunction between consecutive clauses")
    src, tgt = _render_clause(sentence.clauses[0])
    for conj, clause in zip(sentence.conjunctions, sentence.clauses[1:]):
        _check(conj in CONJUNCTIONS, f"unknown conjunction {conj!r}")
        clause_src, clause_tgt = _render_clause(clause)
        src += [conj, *clause_src]
        tgt += [CONJUNCTIONS[conj], *clause_tgt]
    return " ".join(src + [END]), " ".join(tgt + [END])


# --- corpus ------------------------------------------------------------------------


def generate_pairs(n: int, seed: int, max_len: int = 60,
                   exclude: frozenset = frozenset()) -> list[tuple[str, str]]:
    """Return ``n`` pairs with distinct source sentences, both sides at most ``max_len`` tokens.

    The output for ``n`` is a prefix of the output for any larger ``n``.
    Source sentences in ``exclude`` are never returned.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if max_len < MIN_MAX_LEN:
        raise ValueError(f"max_len must be at least {MIN_MAX_LEN}, got {max_len}")
    rng = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set(exclude)
    # The language is far larger than any requested corpus, so running out of
    # new sentences means a caller asked for something unreasonable.
    budget = 100 * n + 1000
    while len(pairs) < n:
        if budget == 0:
            raise RuntimeError(f"could not draw {n} distinct sentences of at most {max_len} tokens")
        budget -= 1
        src, tgt = render(sample_sentence(rng))
        if src in seen or max(len(src.split()), len(tgt.split())) > max_len:
            continue
        seen.add(src)
        pairs.append((src, tgt))
    return pairs


def length_buckets(max_len: int, count: int) -> list[tuple[int, int]]:
    """``count`` source-length buckets ``(lo, hi)`` (inclusive) of equal width covering 1..``max_len``."""
    if count < 1 or max_len < count:
        raise ValueError(f"cannot split lengths 1..{max_len} into {count} buckets")
    edges = [round(i * max_len / count) for i in range(count + 1)]
    return [(edges[i] + 1, edges[i + 1]) for i in range(count)]


# Shortest clause: "the dog sleeps" plus a conjunction; sentences of up to
# max_len // TOKENS_PER_SHORT_CLAUSE clauses can still land in every bucket.
TOKENS_PER_SHORT_CLAUSE = 4


def generate_bucketed_pairs(per_bucket: Sequence[int], buckets: Sequence[tuple[int, int]], seed: int,
                            exclude: frozenset = frozenset()) -> list[tuple[str, str]]:
    """Pairs with distinct sources, ``per_bucket[i]`` of them with a source length in ``buckets[i]``.

    Sentences longer than the grammar's usual three clauses are rare (about
    0.3% of sources exceed 40 tokens), so the number of clauses is drawn
    uniformly from 1 to the most that fit the longest bucket; the clauses
    themselves follow the grammar as usual. Pairs come out bucket by bucket.
    """
    if len(per_bucket) != len(buckets):
        raise ValueError(f"{len(per_bucket)} bucket sizes for {len(buckets)} buckets")
    longest = max(hi for _, hi in buckets)
    max_clauses = max(len(P_CLAUSES), longest // TOKENS_PER_SHORT_CLAUSE)
    rng = random.Random(seed)
    found: list[list[tuple[str, str]]] = [[] for _ in buckets]
    seen: set[str] = set(exclude)
    budget = 2000 * sum(per_bucket) + 1000
    while any(len(f) < n for f, n in zip(found, per_bucket)):
        if budget == 0:
            missing = [f"{lo}-{hi}" for (lo, hi), f, n in zip(buckets, found, per_bucket) if len(f) < n]
            raise RuntimeError(f"could not draw enough distinct sentences with source lengths {', '.join(missing)}")
        budget -= 1
        src, tgt = render(sample_sentence(rng, rng.randint(1, max_clauses)))
        length = len(src.split())
        for (lo, hi), f, n in zip(buckets, found, per_bucket):
            if lo <= length <= hi and len(f) < n and src not in seen:
                seen.add(src)
                f.append((src, tgt))
    return [pair for f in found for pair in f]


def write_corpus(out_dir, train: int = 20000, valid: int = 500, test: int = 500, seed: int = 1,
                 max_len: int = 60, src_lang: str = "src", tgt_lang: str = "tgt",
                 test_max_len: Optional[int] = None, test_buckets: int = 5) -> dict:
    """Write ``{train,valid,test}.{src_lang,tgt_lang}`` into ``out_dir`` and return stats.

    Test and valid are drawn first from one stream of distinct sentences, so
    they do not change with ``train`` and never overlap it.  The stats dict
    holds the pairs per split and, over all splits, ``mean_src_len``,
    ``mean_tgt_len`` (tokens, "." included) and ``src_tgt_ratio``.

    Length control (for measuring length generalisation): with
    ``test_max_len``, ``max_len`` limits the train and valid pairs only and
    the test set is length-stratified instead: ``test`` pairs spread evenly
    over ``test_buckets`` equal-width source-length buckets covering
    1..``test_max_len`` (:func:`generate_bucketed_pairs`, its own random
    stream, seed + 1), so buckets beyond ``max_len`` hold sentences longer
    than any training sentence.
    """
    if test_max_len is None:
        pairs = generate_pairs(test + valid + train, seed, max_len)
        test_pairs, rest = pairs[:test], pairs[test:]
    else:
        buckets = length_buckets(test_max_len, test_buckets)
        per_bucket = [test // test_buckets + (i < test % test_buckets) for i in range(test_buckets)]
        test_pairs = generate_bucketed_pairs(per_bucket, buckets, seed + 1)
        rest = generate_pairs(valid + train, seed, max_len, frozenset(src for src, _ in test_pairs))
    splits = {"test": test_pairs, "valid": rest[:valid], "train": rest[valid:]}
    os.makedirs(out_dir, exist_ok=True)
    for split, split_pairs in splits.items():
        for side, lang in enumerate((src_lang, tgt_lang)):
            path = os.path.join(out_dir, f"{split}.{lang}")
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.writelines(pair[side] + "\n" for pair in split_pairs)
    pairs = test_pairs + rest
    src_tokens = sum(len(src.split()) for src, _ in pairs)
    tgt_tokens = sum(len(tgt.split()) for _, tgt in pairs)
    return {
        "train": train, "valid": valid, "test": test,
        "mean_src_len": round(src_tokens / len(pairs), 2),
        "mean_tgt_len": round(tgt_tokens / len(pairs), 2),
        "src_tgt_ratio": round(src_tokens / tgt_tokens, 3),
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="posnet-synth",
        description="Write a deterministic synthetic parallel corpus (grammar: see posnet_fairseq/synth.py).")
    parser.add_argument("--out-dir", required=True, help="directory for {train,valid,test}.{src,tgt}")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--train", type=int, default=20000, help="training pairs")
    parser.add_argument("--valid", type=int, default=500, help="validation pairs")
    parser.add_argument("--test", type=int, default=500, help="test pairs")
    parser.add_argument("--max-len", type=int, default=60,
                        help=f"maximum tokens per side (with --test-max-len: of train and valid pairs), "
                        f"at least {MIN_MAX_LEN}")
    parser.add_argument("--test-max-len", type=int, default=None,
                        help="length-stratified test set: source lengths 1..N in --test-buckets equal "
                        "buckets, the same number of pairs in each (default: test pairs like train pairs)")
    parser.add_argument("--test-buckets", type=int, default=5,
                        help="source-length buckets of the test set with --test-max-len (default 5)")
    parser.add_argument("--src-lang", default="src", help="file suffix of the source side")
    parser.add_argument("--tgt-lang", default="tgt", help="file suffix of the target side")
    args = parser.parse_args(argv)
    for flag in ("train", "valid", "test"):
        if getattr(args, flag) <= 0:
            parser.error(f"--{flag} must be a positive number of pairs, got {getattr(args, flag)}")
    if args.max_len < MIN_MAX_LEN:
        parser.error(f"--max-len must be at least {MIN_MAX_LEN}, got {args.max_len}")
    if args.test_max_len is not None:
        if args.test_buckets < 1 or args.test_max_len < MIN_MAX_LEN * args.test_buckets // 2:
            parser.error(f"--test-max-len {args.test_max_len} with --test-buckets {args.test_buckets}: "
                         f"need at least 1 bucket and buckets at least {MIN_MAX_LEN // 2} tokens wide")
        if args.test < args.test_buckets:
            parser.error(f"--test {args.test}: need at least one pair per bucket (--test-buckets {args.test_buckets})")
    for flag in ("src_lang", "tgt_lang"):
        value = getattr(args, flag)
        if not value or not value.replace("_", "").replace("-", "").isalnum():
            parser.error(f"--{flag.replace('_', '-')} must be a non-empty file suffix "
                         f"of letters, digits, '-' or '_', got {value!r}")
    if args.src_lang == args.tgt_lang:
        parser.error("--src-lang and --tgt-lang must differ")
    stats = write_corpus(args.out_dir, train=args.train, valid=args.valid, test=args.test,
                         seed=args.seed, max_len=args.max_len,
                         src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                         test_max_len=args.test_max_len, test_buckets=args.test_buckets)
    print(f"posnet-synth: wrote {args.out_dir}: " + ", ".join(f"{k}={v}" for k, v in stats.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
