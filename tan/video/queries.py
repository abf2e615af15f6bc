"""Sentence features of a query file, by a text backbone: one ``qid{qid}.npz``
per query holding ``last_hidden_state`` [L, E] and ``pooler_output`` [P],
the names and layout lighthouse stores CLIP's text features in, so that
``INPUT.SENTENCE_FEATURES`` reads them (docs/data.md §9.3), and ``query``,
the sentence they were made from. Written atomically; queries that have a
file are skipped, as videos are, unless their sentence has changed since."""
import json
import os
import zipfile

import numpy as np

from ..errors import TanError
from ..utils.io import atomic_write_bytes
from ..utils.logger import get_logger
from ..utils.progress import progress
from ..version import __version__
from ..data.features.provenance import RECORD_VERSION, describe_extractor
from .extract import ExtractionSummary, claim_folder, npz_bytes, to_do


SENTENCE_KEY = "query"  # the sentence a file's features were made from


def read_query_file(path):
    """[(qid, sentence)] of a JSON-lines file whose records have "qid" and "query" (or "sentence"):
    a Moment-DETR / lighthouse annotation file as it is. A qid may come again with the same
    sentence (it is encoded once), not with another."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as e:
        raise TanError(f"query file {path!r} cannot be read ({e})") from None
    queries, seen = [], {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            raise TanError(f"{path}:{number}: not a JSON object ({e})") from None
        qid = record.get("qid") if isinstance(record, dict) else None
        sentence = record.get("query", record.get("sentence")) if isinstance(record, dict) else None
        if isinstance(qid, bool) or not isinstance(qid, (int, str)) or str(qid) == "" or "/" in str(qid):
            raise TanError(f'{path}:{number}: expected "qid", a number or a string that can name a file')
        if not isinstance(sentence, str) or not sentence.strip():
            raise TanError(f'{path}:{number}: expected a sentence as "query" (or "sentence"), a non-empty string')
        if str(qid) in seen and seen[str(qid)] != sentence.strip():
            raise TanError(f'{path}:{number}: qid {qid!r} was given the sentence {seen[str(qid)]!r} before; a qid '
                           f'names one file of features, so it must name one sentence')
        if str(qid) not in seen:
            seen[str(qid)] = sentence.strip()
            queries.append((str(qid), sentence.strip()))
    if not queries:
        raise TanError(f"query file {path!r} holds no query")
    return queries


def _made_from_another_sentence(path, sentence):
    """Whether the features file ``path`` records a sentence other than ``sentence``, or cannot be read
    (made again); one that records none (an older version's, or made elsewhere) counts as this sentence's."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            return SENTENCE_KEY in stored.files and str(stored[SENTENCE_KEY]) != sentence
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return True


def text_record(backbone, storage=None):
    record = {"version": RECORD_VERSION, "kind": "text", **backbone.record(), "tan_version": __version__}
    return {**record, "storage": storage} if storage else record


def query_file_name(qid):
    return f"qid{qid}.npz"


def extract_queries(queries, backbone, output, batch_size=64, overwrite=False, storage=None):
    """Sentence features of ``queries`` ([(qid, sentence)]) into ``output``, float32 or as ``storage``
    ("float16": as the releases store them); an :class:`ExtractionSummary`."""
    record = text_record(backbone, storage)
    dtype = np.float16 if storage == "float16" else np.float32
    claim_folder(output, record, "sentence features", overwrite)
    summary = ExtractionSummary(output, unit="queries")
    todo = to_do(queries, lambda qid: [os.path.join(output, query_file_name(qid))], _made_from_another_sentence,
                 summary, overwrite, "queries have another sentence than their features were made from (or "
                                     "their features cannot be read); encoding them again")
    get_logger("extract").info("%s: %d queries to encode, %d already in %s", describe_extractor(record), len(todo),
                               len(summary.skipped), output)
    batches = range(0, len(todo), batch_size)
    for start in progress(batches, total=len(batches), desc="query batches", unit="batch"):
        part = todo[start:start + batch_size]
        for (qid, sentence), (hidden, pooled) in zip(part, backbone.encode([s for _, s in part])):
            atomic_write_bytes(os.path.join(output, query_file_name(qid)),
                               npz_bytes({"last_hidden_state": hidden.astype(dtype),
                                          "pooler_output": pooled.astype(dtype), SENTENCE_KEY: np.str_(sentence)}))
            summary.written.append(qid)
            summary.clips += len(hidden)
    return summary
