"""The evaluator ``near_moments``: how close each query's top moment lands, and the submission file.

NEAR-R@1,{k}s: the percent of queries whose first moment starts and ends each within k seconds of
the annotated moment (a query without any moment is a miss), for k in WITHIN. The submission file,
``{dataset}_near_submission.csv``, holds each query's first moment: ``qid,start,end,score``."""
import csv
import io
import os

import numpy as np

from tan.evaluation import DatasetEvaluator, register_evaluator
from tan.utils.io import atomic_write_text

WITHIN = (0.5, 1.0, 2.0)  # seconds
NEAR_METRIC_NAMES = tuple(f"NEAR-R@1,{k:g}s" for k in WITHIN)


@register_evaluator("near_moments")
class NearMomentsEvaluator(DatasetEvaluator):
    METRIC_NAMES = NEAR_METRIC_NAMES
    TITLE = "NEAR"
    COMPARED = NEAR_METRIC_NAMES  # columns of tan-test's comparison of checkpoints

    def evaluate(self):
        errors = []  # per query: the larger of its start's and its end's distance, seconds
        for index, prediction in enumerate(self.ordered()):
            moments, _ = prediction.kept()
            if not len(moments):
                errors.append(np.inf)
                continue
            start, end = (float(x) for x in moments[0])
            truth = self.dataset.moments[index]
            errors.append(max(abs(start - float(truth[0])), abs(end - float(truth[1]))))
        errors = np.asarray(errors)
        return {name: round(100.0 * float(np.mean(errors <= k)), 2) for name, k in zip(NEAR_METRIC_NAMES, WITHIN)}

    def submission_name(self):
        return f"{self.dataset_name}_near_submission.csv"

    def write(self, folder):
        out = io.StringIO()
        table = csv.writer(out, lineterminator="\n")
        table.writerow(["qid", "start", "end", "score"])
        for index in sorted(self.predictions):
            moments, scores = self.predictions[index].kept()
            first = [round(float(x), 4) for x in moments[0]] + [round(float(scores[0]), 6)] if len(moments) else []
            table.writerow([self.dataset.qids[index], *first])
        atomic_write_text(os.path.join(folder, self.submission_name()), out.getvalue())
