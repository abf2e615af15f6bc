"""Measuring harnesses for tools/benchmark.py: timed workloads of tan's models and of
their baselines, which are the tests' equivalence oracles (tests/oracles). Training
and testing never import this; it lives beside the tools, not in the package."""
import os
import sys

ORACLES_PARENT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests")
if ORACLES_PARENT not in sys.path:
    sys.path.append(ORACLES_PARENT)
