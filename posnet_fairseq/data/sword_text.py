"""The verses of a SWORD Bible module as plain text: finding the module, reading it with pysword, and
turning its markup (OSIS, GBF, ThML) into plain text.

pysword (optional: ``requirements/bible.txt``) reads the on-disk formats (zText/rawText, 2- and 4-byte
indexes) and knows the versifications (KJV, NRSVA, ...). This module asks it for the raw text of every
verse of the module's own versification, in canonical order, and strips the markup itself, because
pysword's cleaner drops the canonical psalm superscriptions (``<title canonical="true">``, text that
the other translation has in verse 1) with the section headings, glues the words on either side of a
footnote ("God<note>..</note>created" -> "Godcreated") and leaves entities (``&amp;``).
"""
import functools
import html
import os
import re
from dataclasses import dataclass

PYSWORD = "pysword==0.2.8"
INSTALL_HINT = (f"pip install {PYSWORD} (or: pip install -r requirements/bible.txt; on Debian: apt-get install "
                "python3-pysword)")
# SWORD's own search order after an explicit path: $SWORD_PATH, the user's modules, the system's.
STANDARD_PATHS = ("~/.sword", "/usr/share/sword")
MODULES_HINT = ("on Debian/Ubuntu: apt-get install sword-text-sparv sword-text-web (modules spaRV1909eb, "
                "engWEB2015eb in /usr/share/sword); elsewhere: download the modules' .zip from CrossWire "
                "(https://www.crosswire.org/sword/modules/ModDisp.jsp?modType=Bibles) and pass the .zip or the folder "
                "that holds mods.d/ with --sword-path")


@dataclass
class Module:
    """One opened Bible module: its name, its .conf fields (lower-case keys) and pysword's reader."""
    name: str
    conf: dict
    bible: object

    @property
    def versification(self):
        return self.conf.get("versification", "KJV")

    @property
    def source_type(self):
        return self.conf.get("sourcetype", "Plaintext")

    @property
    def lang(self):
        return self.conf.get("lang", "")

    def describe(self):
        """What stats.json records of the module."""
        return {"module": self.name, "description": self.conf.get("description", ""),
                "version": self.conf.get("version", ""), "versification": self.versification,
                "source_type": self.source_type, "lang": self.lang}


def _pysword_modules():
    try:
        from pysword.modules import SwordModules
    except ImportError:
        raise ImportError(f"reading SWORD modules needs the optional package pysword: {INSTALL_HINT}") from None
    return SwordModules


def search_paths(sword_paths=()):
    """The SWORD data paths to search, in order: the given ones (a folder holding mods.d/ or a module .zip),
    then $SWORD_PATH and the standard locations that exist."""
    given = [os.path.expanduser(p) for p in sword_paths]
    for path in given:
        if not (path.endswith(".zip") and os.path.isfile(path) or os.path.isdir(os.path.join(path, "mods.d"))):
            raise FileNotFoundError(f"--sword-path {path}: neither a module .zip nor a folder holding mods.d/")
    found = [os.environ["SWORD_PATH"]] if os.environ.get("SWORD_PATH") else []
    found += [os.path.expanduser(p) for p in STANDARD_PATHS]
    return given + [p for p in found if os.path.isdir(os.path.join(p, "mods.d")) and p not in given]


def open_module(name, sword_paths=()):
    """The module ``name`` (case-insensitive) from the first of :func:`search_paths` that has it."""
    sword_modules = _pysword_modules()
    paths = search_paths(sword_paths)
    for path in paths:
        library = sword_modules(path)
        confs = library.parse_modules()
        match = [key for key in confs if key.lower() == name.lower()]
        if match:
            conf = confs[match[0]]
            compress = conf.get("compresstype", "ZIP").upper()
            if compress != "ZIP":
                # pysword 0.2.8 looks for the key "compress_type", which no .conf has, and inflates as ZIP.
                raise ValueError(f"module {match[0]} in {path}: CompressType={compress}; {PYSWORD} reads only ZIP "
                                 f"compressed modules correctly")
            return Module(match[0], conf, library.get_bible_from_module(match[0]))
    searched = ", ".join(paths) if paths else "no SWORD path exists"
    raise FileNotFoundError(f"SWORD module {name} not found (searched: {searched}); {MODULES_HINT}")


def verses(module):
    """((book, chapter, verse), raw markup) for every verse of the module's versification, in canonical
    order; a verse the module does not have reads as ''."""
    bible = module.bible
    if hasattr(bible, "_decompressed_text"):
        # pysword 0.2.8 inflates a whole block (a book) again for every verse it reads: memoising the
        # last block reads a Bible in a second instead of four minutes.
        bible._decompressed_text = functools.lru_cache(maxsize=1)(bible._decompressed_text)
    for books in bible.get_structure().get_books().values():
        for book in books:
            texts = list(bible.get_iter(books=book.osis_name, clean=False))
            if len(texts) != sum(book.chapter_lengths):
                raise ValueError(f"module {module.name}: {book.osis_name} gave {len(texts)} verses, its "
                                 f"{module.versification} versification has {sum(book.chapter_lengths)}")
            keys = ((c, v) for c, n in enumerate(book.chapter_lengths, 1) for v in range(1, n + 1))
            for (chapter, verse), text in zip(keys, texts):
                yield (book.osis_name, chapter, verse), text


# A footnote, or the tag of an added word or a quotation, leaves this mark: a space where it separated two words, nothing
# before punctuation or after an opening bracket.
_GAP = "\x00"
_GAP_SPACE = re.compile(r"(?<=[^\s(\[“‘¿¡\x00])\x00+(?=[\w“‘¿¡(])")
_SPACES = re.compile(r"\s+")


def _tag(name):
    """An element's start, end or empty tag."""
    return rf"</?{name}\b[^>]*>"


def _element(name):
    """An element with its content (or an empty one)."""
    return rf"<{name}\b[^>]*/>|<{name}\b[^>]*>.*?</{name}>"


# OSIS. Text after a book's closing <div type="book" eID=...> is not the verse's (the WEB puts its
# glossary after Revelation 22:21). Footnotes, cross references and their readings, section headings
# (titles that are not canonical) and the speaker labels of the Song of Songs are not translated
# text; the content of every other element is (words with Strong's numbers, added words, quotes,
# canonical titles). Poetry lines, paragraphs and list items separate words. The Reina-Valera writes
# the words a translator added (<transChange>) without spaces around them: they are separate words,
# except an added enclitic pronoun, which belongs to its verb: the Reina-Valera writes an accent on
# the verb an enclitic joins (sáca<transChange>lo</transChange>, díjo-le) and its infinitives and
# imperatives end in -r or -d (pagar-la, Dad-me); after any other word the pronoun stands alone
# (las gentes lo oyeron). Of the Reina-Valera's 117 added pronouns a few come out wrong (Josuélos).
# The WEB writes no space after some quotations (light.”</q><w>Jesus): a <q> tag separates words too.
_OSIS_BOOK_END = re.compile(r'<div\b(?=[^>]*\beID=)(?=[^>]*\btype="book")[^>]*/>.*', re.S)
_OSIS_GAPS = re.compile("|".join([_element("note"), _tag("transChange"), _tag("q")]), re.S)
_OSIS_CLITIC = re.compile(r"\b(\w*[áéíóúÁÉÍÓÚ]\w*|\w*[rdRD])(?:</w>)?<transChange\b[^>]*>"
                          r"((?:me|te|se|le|les|lo|los|la|las|nos|os)+)</transChange>")
_OSIS_DROP = re.compile("|".join([_element("speaker"), _element("figure"),
                                  r'<title\b(?![^>]*canonical="true")[^>]*>.*?</title>']), re.S)
_OSIS_BREAK = re.compile("|".join(_tag(n) for n in ("l", "lg", "lb", "p", "div", "list", "item", "chapter",
                                                     "verse", "milestone", "head")))
_ANY_TAG = re.compile(r"<[^>]*>")

# GBF: footnotes <RF>..<Rf>, titles <TS>..<Ts>, Strong's and morphology <WH..>/<WG..>/<WT..>,
# paragraphs and line breaks <CM>/<CL>; other tags (fonts <FI>..<Fi>) keep their content.
_GBF_GAPS = re.compile(r"<RF>.*?<Rf>", re.S)
_GBF_DROP = re.compile(r"<T[SAHBCNPT]>.*?<T[sahbcnpt]>|<W[HGT][^>]*>", re.S)
_GBF_BREAK = re.compile(r"<C[ML]>")

# ThML: footnotes, scripture references and Strong's <sync .../> are dropped; <br/>, <p>, <div> break.
_THML_GAPS = re.compile(_element("note"), re.S)
_THML_DROP = re.compile(_element("scripRef") + "|" + _tag("sync"), re.S)
_THML_BREAK = re.compile("|".join(_tag(n) for n in ("br", "p", "div")))

_MARKUP = {
    "osis": (_OSIS_BOOK_END, _OSIS_CLITIC, _OSIS_GAPS, _OSIS_DROP, _OSIS_BREAK),
    "gbf": (None, None, _GBF_GAPS, _GBF_DROP, _GBF_BREAK),
    "thml": (None, None, _THML_GAPS, _THML_DROP, _THML_BREAK),
}


def plain_text(raw, source_type="OSIS"):
    """The translated text of one verse's ``raw`` markup as one line: markup of ``source_type`` (a
    module's SourceType: OSIS, GBF, ThML or Plaintext) removed as described above, entities decoded,
    white space collapsed."""
    kind = source_type.lower()
    if kind in _MARKUP:
        cut, join, gaps, drop, brk = _MARKUP[kind]
        if cut is not None:
            raw = cut.sub("", raw)
        if join is not None:
            raw = join.sub(r"\1\2" + _GAP, raw)
        raw = gaps.sub(_GAP, raw)
        raw = drop.sub("", raw)
        raw = brk.sub(" ", raw)
        raw = _ANY_TAG.sub("", raw)
        raw = _GAP_SPACE.sub(" ", raw).replace(_GAP, "")
        raw = html.unescape(raw)
    elif kind != "plaintext":
        raise ValueError(f"SourceType={source_type}: unknown markup (expected OSIS, GBF, ThML or Plaintext)")
    return _SPACES.sub(" ", raw).strip()
