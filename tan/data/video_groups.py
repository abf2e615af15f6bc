"""Queries grouped by video, for models trained on batches of videos:
an item is one video with all its sentences, or a sample of them
(DATALOADER.SENTENCES_PER_VIDEO), so that each sentence finds negatives in
its own video and in the batch's other videos (docs/data.md §6)."""
import numpy as np
import torch
from torch.utils.data import Dataset


def sentences_of_videos(video_ids, num_videos):
    """[V] arrays of query indices, in order, for video ids 0..V-1 (empty for a video without queries)."""
    order = np.argsort(video_ids, kind="stable")
    bounds = np.searchsorted(video_ids[order], np.arange(num_videos + 1))
    return [order[bounds[v]:bounds[v + 1]] for v in range(num_videos)]


class VideoGroups(Dataset):
    """Items are the videos that have queries, of one or several (concatenated)
    :class:`~tan.data.dataset.MomentDataset`. A key is a video's position, or (position, epoch) from a
    sampler that names the epoch: with ``max_sentences`` > 0 a video with more
    sentences gives a sample of that many, drawn from (seed, epoch, video), so
    a resumed run draws what an uninterrupted one would, in any worker.

    ``windowed`` (training by INPUT.TRAIN_WINDOW): a video long enough to be trained on by windows
    gives an item per sentence instead, anchored on it: the window holds the anchor's moment and
    keeps the video's other sentences whose moments it holds. An epoch so takes every sentence of a
    long video as a window's own, as a model trained on queries does, rather than one window of the
    video with the few sentences it happens to hold."""

    def __init__(self, datasets, max_sentences=0, seed=0, windowed=False):
        self.datasets, self.max_sentences, self.seed = list(datasets), max_sentences, seed
        self.name = "+".join(d.name for d in self.datasets)
        self.videos = [(k, g) for k, d in enumerate(self.datasets)
                       for g in sentences_of_videos(d.video_ids, len(d.videos)) if len(g)]
        # (video, anchor query or -1): the video's own item, or one per sentence of a long video
        self.groups = []
        for v, (k, g) in enumerate(self.videos):
            windows = self.datasets[k].train_windows
            if windowed and windows is not None and windows.applies_to(float(self.datasets[k].durations[g[0]])):
                self.groups += [(v, int(q)) for q in g]
            else:
                self.groups.append((v, -1))

    def without(self, queries):
        """These groups without the videos all of whose sentences are in ``queries`` (a set of indices)."""
        other = object.__new__(VideoGroups)
        kept = [(v, a) for v, a in self.groups if not set(self.videos[v][1].tolist()) <= queries]
        other.__dict__ = dict(self.__dict__, groups=kept)
        return other

    @property
    def by_query(self):
        """The queries' dataset (of a single dataset's groups: evaluation's case)."""
        [dataset] = self.datasets
        return dataset

    def __len__(self):
        return len(self.groups)

    def sentences(self, position, epoch=0):
        """The item's sentences (query indices): the anchor first, then the video's others, where it
        has one (its window keeps those it holds, and samples them); else the video's, or a sample."""
        video, anchor = self.groups[position]
        queries = self.videos[video][1]
        if anchor >= 0:
            return np.concatenate([[anchor], queries[queries != anchor]]).astype(queries.dtype)
        if self.max_sentences and len(queries) > self.max_sentences:
            rng = np.random.default_rng([self.seed % 2 ** 32, epoch, position])  # SEED may be negative
            queries = np.sort(rng.choice(queries, self.max_sentences, replace=False))
        return queries

    def __getitem__(self, key):
        position, epoch = key if isinstance(key, tuple) else (key, 0)
        queries = self.sentences(position, epoch)
        dataset = self.datasets[self.videos[self.groups[position][0]][0]]
        video = dataset.videos[dataset.video_ids[queries[0]]]
        moments, gt_moments, durations = dataset.moments[queries], dataset.gt_moments[queries], dataset.durations[queries]
        # A long video (INPUT.TRAIN_WINDOW) gives a window holding its first sentence's (its anchor's)
        # moment, with the sentences whose moments it holds too, placed in its seconds.
        window = dataset.item_window(queries[0], epoch if isinstance(key, tuple) else None, rng_key=position)
        if window is not None:
            queries = np.asarray([q for q in queries if q == queries[0] or window.holds(dataset.moments[q])])
            if self.max_sentences and len(queries) > self.max_sentences:  # the anchor and a sample of the rest
                rng = np.random.default_rng([self.seed % 2 ** 32, epoch, position])
                queries = np.concatenate([queries[:1], np.sort(rng.choice(queries[1:], self.max_sentences - 1,
                                                                          replace=False))])
            moments, gt_moments = window.placed(dataset.moments[queries]), window.placed(dataset.gt_moments[queries])
            durations = np.full(len(queries), window.duration, dtype=np.float32)
        ranked = dataset.ranked_windows(queries[0], epoch, rng_key=position) if window is not None else None
        return {
            **(dataset.ranked_fields(queries[0], ranked, queries) if ranked else {}),
            "feats": torch.from_numpy(dataset.video_features(video, window)),  # [P, D_in]
            "queries": [torch.from_numpy(dataset.query(q)) for q in queries],
            "moments": torch.from_numpy(moments),  # [S_v, 2]
            "gt_moments": torch.from_numpy(gt_moments),  # [S_v, W, 2]
            "durations": torch.from_numpy(durations),  # [S_v]
            "indices": torch.from_numpy(queries.astype(np.int64)),  # [S_v]
        }
