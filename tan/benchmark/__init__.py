"""Measuring tools: a reference-style baseline to compare against and the
workloads of ``tools/benchmark.py``."""
