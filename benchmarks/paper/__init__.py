"""Results: the runs behind docs/results.md, their runners and the tables made from them (benchmarks/README.md)."""
