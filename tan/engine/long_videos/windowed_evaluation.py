"""Evaluating a dataset whose videos are longer than those the model was trained on, by windows.

The queries of the videos that TEST.WINDOW selects (tan.engine.long_videos.windows) are
left out of the evaluation's whole-video pass and grounded by windows; the
others are scored as before. Each process takes a share of those videos; a
video's features are read once for all of its queries, and memory follows
TEST.WINDOW.BATCH, not the video's length. (Where Moment-DETR's highlight
metrics need every query's clip saliency, the whole-video pass runs over
all queries and only their moments are replaced.)
"""
from collections import defaultdict

import torch

from ...data.dataset import named
from ...utils import comm
from ...utils.logger import get_logger
from ...utils.progress import progress
from ..prediction import ground_windowed
from .relevance_stage import check_top_k, relevance_stage
from .windows import WindowedVideo
from ..wrappers import unwrap


class WindowedEvaluation:
    """The windows of one evaluation: ``cfg`` (the model's input, TEST.NMS_*, SOLVER.AMP) and
    ``settings`` (a tan.engine.long_videos.windows.WindowSettings)."""

    def __init__(self, cfg, settings):
        self.cfg, self.settings = cfg, settings

    def long_videos(self, dataset):
        """{video index: [query indices]} of the videos of ``dataset`` that are grounded by windows:
        longer than the threshold, and with more feature rows than one window takes (a video of
        fewer rows, whatever its duration, is scored whole in the evaluation's usual pass: windows
        would all hold its same rows; the log names them)."""
        longer = defaultdict(list)
        for index, (video, duration) in enumerate(zip(dataset.video_ids.tolist(), dataset.durations.tolist())):
            if self.settings.applies_to(duration):
                longer[video].append(index)
        rows = dataset.features.shapes([dataset.videos[video] for video in longer]) if longer else {}
        chosen, few_rows = {}, []
        for video, queries in longer.items():
            name, duration = dataset.videos[video], float(dataset.durations[queries[0]])
            what = f"video {name!r} of {getattr(dataset, 'name', 'the dataset')}"
            if name in rows and len(self.spans(duration, rows[name][0], what)) == 1:
                few_rows.append(name)
            else:
                chosen[video] = queries
        if few_rows:
            get_logger("inference").info(
                "%s: %d video%s longer than %.4g s with no more feature rows than one window of %.4g s takes, "
                "scored whole: %s", getattr(dataset, "name", "the dataset"), len(few_rows),
                "" if len(few_rows) == 1 else "s", self.settings.longer_than, self.settings.length, named(few_rows))
        return chosen

    def check_relevance(self, core, dataset, chosen):
        """With a relevance stage (TEST.WINDOW.RELEVANCE): log it, refuse a TEST.WINDOW.TOP_K above every
        chosen video's windows (it would keep them all), and say how many videos have no more windows
        than it (each grounded in all of its windows)."""
        stage = relevance_stage(self.cfg, core)
        if stage is None or not chosen:
            return
        rows = dataset.features.shapes([dataset.videos[v] for v in chosen])
        counts = [len(self.spans(float(dataset.durations[q[0]]), rows[dataset.videos[v]][0]))
                  for v, q in chosen.items()]
        name = getattr(dataset, "name", "the dataset")
        check_top_k(stage, max(counts), f"any of the {len(counts)} videos of {name} grounded by windows")
        few = sum(c <= stage.top_k for c in counts)
        get_logger("inference").info("%s: %s%s", name, stage.describe(), f"; {few} of the {len(counts)} videos have "
                                     f"no more windows and are grounded in all of theirs" if few else "")

    def spans(self, duration, num_rows, what="the video"):
        """The windows of a video of ``duration`` seconds and ``num_rows`` feature rows, laid on its rows."""
        return self.settings.spans(duration, num_rows, what)

    def describe(self, chosen):
        """What was windowed, for the log and for metrics.json."""
        described = {"videos": len(chosen), "queries": sum(len(q) for q in chosen.values()),
                     "length": self.settings.length, "stride": self.settings.stride,
                     "longer_than": self.settings.longer_than}
        if not self.settings.cover_end or self.settings.rows_per_second or not self.settings.candidates:
            # how its moments were made, where not as by default (a benchmark's own evaluation)
            described.update(cover_end=self.settings.cover_end, rows_per_second=self.settings.rows_per_second,
                             candidates=self.settings.candidates)
        return described

    @torch.no_grad()
    def predict(self, model, dataset, chosen, device, topk):
        """{query index: (moments [topk, 2] s, filled [topk], scores [topk], None)} of this process's
        share of the ``chosen`` videos (every process calls it; the shares are disjoint)."""
        core = unwrap(model)
        self.check_relevance(core, dataset, chosen)
        rank, world = comm.get_rank(), comm.get_world_size()
        mine = [v for n, v in enumerate(sorted(chosen)) if n % world == rank]
        found = {}
        for video in progress(mine, total=len(mine), desc="windows", unit="video"):
            queries = chosen[video]
            duration = float(dataset.durations[queries[0]])
            windowed = WindowedVideo.of(dataset.features.read(dataset.videos[video]), duration, self.settings,
                                        f"video {dataset.videos[video]!r} of {getattr(dataset, 'name', 'the dataset')}")
            moments, scores, filled, _ = ground_windowed(core, self.cfg, windowed, [dataset.query(i) for i in queries],
                                                         device, topk, strict_top_k=False)
            for row, index in enumerate(queries):
                found[index] = (moments[row], filled[row], scores[row], None)
        return found
