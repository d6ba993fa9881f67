"""Data speed: generation, builds, estimates, codecs, downloads and reading (benchmarks/README.md)."""
