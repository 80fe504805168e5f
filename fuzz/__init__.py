"""Fuzz targets for crcmerkle (issue 6): differential kernel fuzzing and parser fuzzing.

Targets (each a function `target(data: bytes) -> None` that raises only on a real bug):
  kernels    every backend vs the portable one and a pure-Python reference (fuzz_kernels)
  tree       `.tree` bytes: parse to a valid tree or raise TreeFileError (fuzz_parsers)
  blockmeta  `.blocks` bytes: parse or raise BlockMetaError (fuzz_parsers)
  diff       the native tree diff vs Ozone's rules in plain Python (fuzz_diff)

Run with `python -m fuzz TARGET ...` (see fuzz/README.md): atheris (coverage-guided
libFuzzer) when installed, else a built-in mutation engine, so CI needs no extra package.
"""

TARGETS = ("kernels", "tree", "blockmeta", "diff")
