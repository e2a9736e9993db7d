"""Baselines the benchmarks time hexamer against: other ways users compute the same numbers."""
