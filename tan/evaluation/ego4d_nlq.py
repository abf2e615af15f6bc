"""Ego4D NLQ's figures and submission file as an evaluator: the evaluator of the "ego4d_nlq" format
(docs/long_videos.md, "Metrics of the long-video benchmarks"; tan.evaluation.long_video_metrics holds
the arithmetic of its evaluate_ego4d_nlq.py)."""
import json
import os

from ..config.evaluators import register_evaluator
from ..data.formats.ego4d_nlq import NOT_ASKED
from ..errors import TanError
from ..utils.io import atomic_write_text
from .evaluator import DatasetEvaluator
from .left_out import left_out_misses
from .long_video_metrics import NLQ_METRIC_NAMES, nlq_metrics

# Ego4D NLQ's evaluation server (and its evaluate_ego4d_nlq.py) read one JSON object: each query's clip,
# annotation and place in it, and its predicted windows (clip seconds), best first, at most five.
NLQ_SUBMISSION = {"version": "1.0", "challenge": "ego4d_nlq_challenge"}
NLQ_PREDICTED = 5


def nlq_submission_name(dataset_name):
    return f"{dataset_name}_submission.json"


def write_nlq_submission(path, dataset, predictions):
    """Ego4D NLQ's submission file of ``dataset``'s queries (ids ``{annotation_uid}_{query_idx}``,
    tan.data.formats.ego4d_nlq) from inference's ``predictions`` {index: Prediction}."""
    results = []
    for index in sorted(predictions):
        moments, filled = predictions[index][:2]
        annotation_uid, _, query_idx = str(dataset.qids[index]).rpartition("_")
        results.append({"clip_uid": dataset.videos[dataset.video_ids[index]], "annotation_uid": annotation_uid,
                        "query_idx": int(query_idx),
                        "predicted_times": [[float(s), float(e)] for s, e in moments[filled][:NLQ_PREDICTED].tolist()]})
    atomic_write_text(path, json.dumps(dict(NLQ_SUBMISSION, results=results)) + "\n")


@register_evaluator("ego4d_nlq")
class Ego4dNlqEvaluator(DatasetEvaluator):
    """Ego4D NLQ's figures (its evaluator's arithmetic) of the kept moments, named NLQ-*, over every
    query of the file with a sentence: those the reader or the dataset left out (a window of no
    length, which the evaluator scores as a miss; a clip without features) count as misses.
    NLQ-queries: how many queries the figures are over. The submission file holds every query's
    top NLQ_PREDICTED moments."""

    METRIC_NAMES = NLQ_METRIC_NAMES
    TITLE = "Ego4D NLQ"

    def predicted_per_query(self):
        return NLQ_PREDICTED

    def evaluate(self):
        dataset, listed = self.dataset, []
        for i, prediction in enumerate(self.ordered()):
            if not prediction.filled.any():
                raise TanError(f"{dataset.name}: query {dataset.qids[i]!r} has no predicted moment; Ego4D NLQ's "
                               f"figures need one for every query")
            listed.append(prediction.kept()[0].double().numpy())
        empty, unevaluated = left_out_misses(dataset, NOT_ASKED, "NLQ")
        figures = nlq_metrics(listed, list(dataset.moments), empty_windows=empty, misses=unevaluated)
        result = {name: figures[name[len("NLQ-"):]] for name in NLQ_METRIC_NAMES}
        result["NLQ-queries"] = figures["evaluated"]
        return result

    def submission_name(self):
        return nlq_submission_name(self.dataset_name)

    def write(self, folder):
        write_nlq_submission(os.path.join(folder, self.submission_name()), self.dataset, self.predictions)
