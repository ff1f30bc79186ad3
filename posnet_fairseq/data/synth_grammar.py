"""The grammar of the synthetic corpus (:mod:`.synth`): sentence structures, how they are drawn,
and the transfer rules that render one as a (source, target) pair. The words are
:mod:`.synth_lexicon`'s.

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
translation is well defined.

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

import random
from dataclasses import dataclass
from typing import Optional

from .synth_lexicon import (ADJECTIVES, ADV_PREPOSITIONS, CONJUNCTIONS, END, INTRANSITIVE_VERBS, NOUNS,
                            NP_PREPOSITIONS, OBJECT_PARTICLE, RELATIVE, TRANSITIVE_VERBS)

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

