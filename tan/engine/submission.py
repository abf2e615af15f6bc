"""Moment-DETR's submission file: what its evaluation server and ``standalone_eval`` read
(docs/metric.md §6.3). One JSON line per query: ``qid``, ``query``, ``vid``,
``pred_relevant_windows`` ([start, end, score] in seconds, best first, at most ten) and, for
datasets with saliency labels or without any labels, ``pred_saliency_scores`` (one score per
2-second clip). The
QVHighlights server takes ``hl_val_submission.jsonl`` and ``hl_test_submission.jsonl`` in one zip."""
import json
import re

from ..utils.io import atomic_write_text

# a dataset named "qvhighlight..._{split}" gets the server's file name, hl_{split}_submission.jsonl
_QVHIGHLIGHTS = re.compile(r"qvhighlights?(_\w+)?_(?P<split>train|val|test)$")


def submission_name(dataset_name):
    """The submission file's name for ``dataset_name``: the server's for QVHighlights, else {name}_submission.jsonl."""
    found = _QVHIGHLIGHTS.fullmatch(dataset_name)
    return f"hl_{found['split']}_submission.jsonl" if found else f"{dataset_name}_submission.jsonl"


def submission_record(qid, query, vid, windows, saliency=None):
    """One line: ``windows`` [(start, end, score)] best first; ``saliency`` a score per clip, or None.
    The values are written unrounded: rounded scores of a barely trained model tie, and ties change
    the ranks that mAP and HIT@1 read, so the file scores as the evaluation that wrote it."""
    record = {"qid": qid, "query": query, "vid": vid,
              "pred_relevant_windows": [[float(s), float(e), float(p)] for s, e, p in windows]}
    if saliency is not None:
        record["pred_saliency_scores"] = [float(x) for x in saliency]
    return record


def write_submission(path, dataset, predictions):
    """The submission file of ``dataset``'s queries from inference's ``predictions``
    {index: (moments, filled, scores, saliency)}; qids as the annotation file wrote them."""
    lines = []
    for index in sorted(predictions):
        moments, filled, scores, saliency = predictions[index]
        windows = [(s, e, p) for (s, e), p in zip(moments[filled].tolist(), scores[filled].tolist())]
        record = submission_record(dataset.qids[index], dataset.sentences[index],
                                   dataset.videos[dataset.video_ids[index]], windows,
                                   None if saliency is None else saliency.tolist())
        lines.append(json.dumps(record))
    atomic_write_text(path, "".join(line + "\n" for line in lines))


# Ego4D NLQ's evaluation server (and its evaluate_ego4d_nlq.py) read one JSON object: each query's clip,
# annotation and place in it, and its predicted windows (clip seconds), best first, at most five.
NLQ_SUBMISSION = {"version": "1.0", "challenge": "ego4d_nlq_challenge"}
NLQ_PREDICTED = 5


def nlq_submission_name(dataset_name):
    return f"{dataset_name}_submission.json"


def write_nlq_submission(path, dataset, predictions):
    """Ego4D NLQ's submission file of ``dataset``'s queries (ids ``{annotation_uid}_{query_idx}``,
    tan.data.formats.ego4d_nlq) from inference's ``predictions``."""
    results = []
    for index in sorted(predictions):
        moments, filled = predictions[index][:2]
        annotation_uid, _, query_idx = str(dataset.qids[index]).rpartition("_")
        results.append({"clip_uid": dataset.videos[dataset.video_ids[index]], "annotation_uid": annotation_uid,
                        "query_idx": int(query_idx),
                        "predicted_times": [[float(s), float(e)] for s, e in moments[filled][:NLQ_PREDICTED].tolist()]})
    atomic_write_text(path, json.dumps(dict(NLQ_SUBMISSION, results=results)) + "\n")
