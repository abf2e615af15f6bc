"""MAD's figures as an evaluator: the evaluator of the "mad" format (docs/long_videos.md, "Metrics of
the long-video benchmarks"; tan.evaluation.long_video_metrics holds the arithmetic of its VLG-Net
evaluation). Which moments a query's predictions are (MAD's windows, seconds and one NMS over the
movie) is the windowed grounding's (TEST.WINDOW in the MAD configs)."""
from ..config.evaluators import register_evaluator
from ..data.formats.mad import NOT_ASKED
from .evaluator import DatasetEvaluator
from .left_out import left_out_misses
from .long_video_metrics import MAD_METRIC_NAMES, MAD_TOPK, mad_metrics

# How many moments of each query MAD's figures read: its largest R@k.
MAD_PREDICTED = MAD_TOPK[-1]


@register_evaluator("mad")
class MadEvaluator(DatasetEvaluator):
    """MAD's figures of each query's top MAD_PREDICTED kept moments, named MAD-*, over every query of
    the file with a sentence and a movie: those the reader or the dataset left out (a window of no
    length, a movie without features) count as misses; MAD-queries: how many queries they are over."""

    METRIC_NAMES = MAD_METRIC_NAMES
    TITLE = "MAD"

    def predicted_per_query(self):
        return MAD_PREDICTED

    def evaluate(self):
        listed = [prediction.kept()[0].double().numpy() for prediction in self.ordered()]
        figures = mad_metrics(listed, list(self.dataset.moments),
                              misses=sum(left_out_misses(self.dataset, NOT_ASKED, "MAD")))
        result = {name: figures[name[len("MAD-"):]] for name in MAD_METRIC_NAMES}
        result["MAD-queries"] = figures["evaluated"]
        return result
