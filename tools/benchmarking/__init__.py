"""Measuring harnesses for tools/benchmark.py and the equivalence tests: a
baseline computed the reference's way, and timed workloads. Training and
testing never import this; it lives beside the tools, not in the package."""
