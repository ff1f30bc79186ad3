"""Cost measurements shared by ``benchmarks/`` and ``posnet-compare``.

* :mod:`.memory` - one training step of an architecture in a fresh process:
  activation memory kept for backward, peak resident memory, target tokens/s
* :mod:`.decode_speed` - fairseq-generate at forced output lengths: sentences/s
  and CPU seconds, the architectures alternating within each round

The scripts in ``benchmarks/`` and ``posnet-compare`` print ratios against a
reference architecture measured in the same run; these modules only measure.
"""
