"""The two vocabularies of the synthetic corpus (:mod:`.synth`): every source word and its fixed
translation. The grammar that combines them is :mod:`.synth_grammar`.

* 48 nouns.  Source: singular ``dog``, plural ``dogs``.  Each noun lexeme has
  a fixed, arbitrary agreement class, written as its marker vowel: o, a or e
  (16 nouns each).  The class cannot be guessed from the source spelling; a
  model has to learn it per noun.  Target: a stem (``dog`` -> ``nuzon``), the
  plural adds ``-<vowel>s`` (o-class ``nuzon`` -> ``nuzonos``).
* 20 transitive and 10 intransitive verbs.  Source: 3rd person singular
  ``sees``, plural ``see``.  Target: one invariant stem (``see`` -> ``libbu``)
  followed by a separate agreement token (rule 6 of :mod:`.synth_grammar`).
* 24 adjectives, uninflected on both sides (``big`` -> ``geva``).
* Function words: determiners ``the`` (definite), ``a`` (indefinite singular),
  ``some`` (indefinite plural), with no "a"/"an" alternation; noun-modifying prepositions ``of with
  without``; adverbial prepositions ``in on near under behind beside``;
  relative ``that``; conjunctions ``and but``.

All source word forms are distinct from each other and from every target
word, so nothing can be solved by copying.
"""

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
    "see": "libbu", "like": "sandi", "find": "leddo", "follow": "pitbe", "help": "vildo", "visit": "dovbo",
    "paint": "rarso", "call": "mubra", "know": "dasdi", "want": "mimtu", "love": "nonzu", "hate": "duvpa",
    "build": "kudna", "pull": "ganvu", "hold": "sokbi", "keep": "kesre", "meet": "pevlo", "draw": "nelmi",
    "open": "govve", "clean": "gogri",
}
INTRANSITIVE_VERBS = {
    "sleep": "gefni", "run": "zatdi", "sing": "zedno", "dance": "kezmo",
    "swim": "sunsi", "jump": "tunla", "laugh": "zakzu", "wait": "birli",
    "fall": "subse", "sit": "mogbi",
}
ADJECTIVES = {
    "big": "geva", "small": "sana", "old": "susi", "young": "dego", "red": "keta", "blue": "vopa",
    "green": "feki", "happy": "pufa", "sad": "veme", "tall": "doti", "short": "fone", "quiet": "samu",
    "loud": "ruvi", "brave": "nise", "lazy": "dage", "clever": "maku", "strange": "vika", "hungry": "luda",
    "angry": "nipo", "tired": "vina", "rich": "gama", "poor": "fule", "dark": "nepu", "bright": "zonu",
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
