"""Reproducible benchmark scripts; results are recorded in docs/BENCHMARKS.md."""
