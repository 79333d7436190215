"""Benchmarks at fleet scale (issue 7); see bench/RESULTS.md for the numbers and commands."""
