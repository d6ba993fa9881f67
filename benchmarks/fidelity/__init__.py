"""Fidelity: ssmbench's generators against the outside generators they follow (benchmarks/README.md)."""
