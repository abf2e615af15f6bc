"""Golden fixtures: the behaviour of the code as it was when they were recorded.

settings.py holds the one golden setup (config overrides, the fixed model
input) shared by tests/test_golden.py and regenerate.py; the other files are
fixtures written by regenerate.py.
"""
