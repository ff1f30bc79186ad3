"""Concatenation augmentation (Varis & Bojar, EMNLP 2021, "Sequence Length is a Domain: Length-based
Overfitting in Transformer Models"): training examples made of several sentence pairs joined.

:class:`ConcatenatedPairsDataset` wraps a fairseq ``LanguagePairDataset`` of N pairs. It holds the N pairs
as they are, then M examples each made of k pairs, k drawn uniformly from {2, ..., K}, the k pairs drawn
uniformly without replacement; the rate r is the share of such examples in the whole,
``M = round(N r / (1 - r))`` (r = 0.5: as many concatenations as pairs). The k sources are joined into one
source and the k targets, in the same order, into one target.

EOS: a binarized sentence ends with EOS; a joined example keeps only the last one (the inner EOS are
removed), so it reads as one long sentence, as a long test sentence does, and the model is not taught to
emit EOS in the middle of a target. An example's size is then the sum of its pairs' sizes minus k - 1, per
side; the sizes are known before any example is read, so batching by ``--max-tokens`` and the length
filters see the joined lengths. An example that would exceed ``--max-source-positions`` or
``--max-target-positions`` keeps only as many of its pairs as fit (and is left out below two).

The composition is drawn anew for every epoch (:meth:`set_epoch`), from the seed and the epoch only: the same
``--seed`` gives the same examples in every run, and fairseq rebuilds the batches every epoch
(``can_reuse_epoch_itr_across_epochs`` is False).
"""
import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils


class ConcatenatedPairsDataset(FairseqDataset):
    def __init__(self, pairs, max_pairs: int, rate: float, seed: int, epoch: int = 1,
                 max_source_positions: int = None, max_target_positions: int = None):
        super().__init__()
        self.pairs, self.max_pairs, self.rate, self.seed = pairs, max_pairs, rate, seed
        self.limits = (max_source_positions or np.iinfo(np.int64).max, max_target_positions or np.iinfo(np.int64).max)
        self.eos = pairs.src_dict.eos()
        self.set_epoch(epoch)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False  # the examples, hence the batches, change every epoch

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.members, self.counts = self._compose(epoch)
        base = (self.pairs.src_sizes, self.pairs.tgt_sizes)
        joined = [self._joined_sizes(sizes[self.members], self.counts) for sizes in base]
        self.src_sizes, self.tgt_sizes = (np.concatenate([sizes, extra]) for sizes, extra in zip(base, joined))

    def _compose(self, epoch):
        """The M x K pair indices of the joined examples and how many of each row's pairs they use."""
        n = len(self.pairs)
        wanted = int(round(n * self.rate / (1 - self.rate))) if n > 1 else 0
        width = min(self.max_pairs, n)
        with data_utils.numpy_seed(self.seed, epoch):
            counts = np.random.randint(2, width + 1, size=wanted) if wanted else np.zeros(0, dtype=np.int64)
            members = np.random.randint(0, n, size=(wanted, width))
            # Without replacement: a row drawing one pair twice among the pairs it uses is drawn again.
            while True:
                used = np.arange(width)[None, :] < counts[:, None]
                ordered = np.sort(np.where(used, members, -1 - np.arange(width)[None, :]), axis=1)
                repeated = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
                if not repeated.any():
                    break
                members[repeated] = np.random.randint(0, n, size=(int(repeated.sum()), width))
        # Keep the pairs that fit both sides' limits (a prefix of the row), and rows of at least two.
        for sizes, limit in zip((self.pairs.src_sizes, self.pairs.tgt_sizes), self.limits):
            totals = np.cumsum(sizes[members], axis=1) - np.arange(width)[None, :]  # j + 1 pairs: j inner EOS less
            counts = np.minimum(counts, (totals <= limit).sum(axis=1))
        keep = counts >= 2
        return members[keep], counts[keep]

    @staticmethod
    def _joined_sizes(sizes, counts):
        used = np.arange(sizes.shape[1])[None, :] < counts[:, None]
        return (sizes * used).sum(axis=1) - (counts - 1)

    def __len__(self):
        return len(self.pairs) + len(self.counts)

    def __getitem__(self, index):
        n = len(self.pairs)
        if index < n:
            return self.pairs[index]
        row = index - n
        items = [self.pairs[int(i)] for i in self.members[row, : self.counts[row]]]
        return {"id": index, "source": self._join([item["source"] for item in items]),
                "target": self._join([item["target"] for item in items])}

    def _join(self, sentences):
        """One sentence: the inner EOS removed, the last sentence's kept."""
        inner = [s[:-1] if s[-1] == self.eos else s for s in sentences[:-1]]
        return torch.cat(inner + [sentences[-1]])

    def collater(self, samples, pad_to_length=None):
        return self.pairs.collater(samples, pad_to_length=pad_to_length)

    def num_tokens(self, index):
        return max(self.src_sizes[index], self.tgt_sizes[index])

    def num_tokens_vec(self, indices):
        return np.maximum(self.src_sizes[indices], self.tgt_sizes[indices])

    def size(self, index):
        return self.src_sizes[index], self.tgt_sizes[index]

    @property
    def sizes(self):
        return np.vstack((self.src_sizes, self.tgt_sizes)).T

    def ordered_indices(self):
        """Shuffled, then sorted by target and source length, as LanguagePairDataset orders (fairseq seeds the
        shuffle per epoch)."""
        indices = np.random.permutation(len(self)).astype(np.int64)
        indices = indices[np.argsort(self.tgt_sizes[indices], kind="mergesort")]
        return indices[np.argsort(self.src_sizes[indices], kind="mergesort")]

    def filter_indices_by_size(self, indices, max_sizes):
        return data_utils.filter_paired_dataset_indices_by_size(self.src_sizes, self.tgt_sizes, indices, max_sizes)
