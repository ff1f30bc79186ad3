"""The one reader of fairseq-generate's output (its S-, T-, H-, D- and P- lines).

``S-i`` and ``T-i`` hold sentence i's source and reference as fairseq saw
them (after ``--post-process``); ``H-i`` and ``D-i`` hold a score, then the
hypothesis (tokenized / detokenized); ``P-i`` the log-probability of each of
its model tokens, the final EOS included (so its count is the hypothesis's
length in model tokens, plus one). Of an n-best list the first, best
hypothesis is kept. Sentences fairseq-generate skipped (longer than the
model accepts) have no lines: :meth:`GenerateOutput.ordered` gives them as
``""`` and :meth:`GenerateOutput.missing` lists them.
"""
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

_LINE = re.compile(r"^([STHDP])-(\d+)\t(.*)$")
KINDS = {"S": "sources", "T": "references", "H": "hypotheses", "D": "detokenized", "P": "positional_scores"}


@dataclass
class GenerateOutput:
    sources: Dict[int, str] = field(default_factory=dict)
    references: Dict[int, str] = field(default_factory=dict)
    hypotheses: Dict[int, str] = field(default_factory=dict)
    detokenized: Dict[int, str] = field(default_factory=dict)
    positional_scores: Dict[int, str] = field(default_factory=dict)

    def ordered(self, kind: str, sentences: int) -> List[str]:
        """``kind`` ("hypotheses", ...) of sentences 0..sentences-1, "" where there is none."""
        lines = getattr(self, kind)
        return [lines.get(i, "") for i in range(sentences)]

    def token_counts(self, sentences: int) -> List[Optional[int]]:
        """Model tokens of the hypotheses of sentences 0..sentences-1, EOS excluded; None where there is
        no P- line."""
        return [len(self.positional_scores[i].split()) - 1 if i in self.positional_scores else None
                for i in range(sentences)]

    def missing(self, sentences: int) -> List[int]:
        """Sentence ids below ``sentences`` without a hypothesis."""
        return [i for i in range(sentences) if i not in self.hypotheses]


def read(path) -> GenerateOutput:
    """The S-/T-/H-/D-/P- lines of a fairseq-generate output file."""
    output = GenerateOutput()
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = _LINE.match(line.rstrip("\n"))
            if m is None:
                continue
            kind, index, text = m.group(1), int(m.group(2)), m.group(3)
            if kind in "HD":
                text = text.split("\t", 1)[1] if "\t" in text else ""  # after the score
            getattr(output, KINDS[kind]).setdefault(index, text)
    return output
