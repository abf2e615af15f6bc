"""Sentences -> tokens, the one way every part of tan splits a sentence into words."""
import re

# Words (lower-cased), clitics such as 's, and single punctuation marks.
_TOKEN = re.compile(r"[a-z0-9]+|'[a-z]+|[^\sa-z0-9]")


def tokenize(sentence):
    """Lower-case and split punctuation off: "He took a pan." -> [he, took, a, pan, .]"""
    return _TOKEN.findall(sentence.lower())
