"""Items -> padded batch tensors."""
import numpy as np
import torch

from ..structures.ranked_windows import RankedWindows
from .features.rows import window_rows


def pad_sentences(sentences, dim=None):
    """Word-vector sequences [L_i, E] (tensors or arrays) -> (queries [S, L_max, E]
    zero-padded, lengths [S]); word-piece ids [L_i] -> ([S, L_max] int64, lengths)."""
    lengths = torch.tensor([len(q) for q in sentences], dtype=torch.long)
    ids = torch.as_tensor(sentences[0]).dim() == 1
    shape = (len(sentences), int(lengths.max())) if ids else (len(sentences), int(lengths.max()), dim)
    queries = torch.zeros(shape, dtype=torch.long if ids else torch.float32)
    for row, q in enumerate(sentences):
        queries[row, :len(q)] = torch.as_tensor(q)
    return queries, lengths


def pad_moments(moments):
    """Ground-truth moments [W_i, 2] of several queries -> [S, W_max, 2], each padded with copies of
    its own first one (a copy changes no best-moment IoU)."""
    most = max(len(m) for m in moments)
    return torch.stack([torch.cat([m, m[:1].expand(most - len(m), 2)]) for m in moments])


def stack_clips(items):
    """{"feats": [B, P, D_in]} of items of one length; of a clip input of variable length
    (items with "clip_count"), the rows zero-padded to the longest item, with ``clip_counts``
    [B] (real rows) and ``clip_offsets`` [B] (each item's first clip in its video)."""
    if "clip_count" not in items[0]:
        return {"feats": torch.stack([it["feats"] for it in items])}
    longest = max(len(it["feats"]) for it in items)
    feats = items[0]["feats"].new_zeros(len(items), longest, items[0]["feats"].shape[-1])
    for row, it in enumerate(items):
        feats[row, :len(it["feats"])] = it["feats"]
    return {"feats": feats,
            "clip_counts": torch.tensor([it["clip_count"] for it in items], dtype=torch.long),
            "clip_offsets": torch.tensor([it["clip_offset"] for it in items], dtype=torch.long)}


def collate_ranked(items, sentences):
    """The ranked windows of a batch (INPUT.TRAIN_WINDOW.RANKED_WINDOWS), each window once: the windows
    that the items of one video drew coincide on its grid, and each of the video's sentences is
    ranked in all of them. ``sentences``: the items' sentence counts, in the batch's order.

    {} when no item brings any; else {"ranked": tan.structures.ranked_windows.RankedWindows}: the batch's distinct
    windows and the (sentence, window) pairs ranked, a pair for each window holding the sentence's
    whole moment (label 1) and each sharing no second with it (label 0); a window holding part of it
    is not ranked. A pair's rows: those the moment covers in a window holding it (moment_rows), all
    the window's real rows in one without it (real_rows)."""
    draws = [it.get("ranked") for it in items]
    if not any(draws):
        return {}
    feats, windows, sources, where = [], [], [], {}
    for draw in (d for d in draws if d is not None):
        for row, (start, end), made_of, raw in zip(draw.feats, draw.spans.tolist(), draw.sources.numpy(),
                                                   draw.raw_rows.tolist()):
            key = (draw.video, start, end)
            if key not in where:
                where[key] = len(feats)
                feats.append(row)
                windows.append(key)
                sources.append((made_of, raw))
    pairs, first = [], 0
    for draw, count in zip(draws, sentences):
        own = {(draw.video, start, end): order for order, (start, end) in
               enumerate(draw.spans.tolist())} if draw is not None else {}
        for s, (begin, finish) in enumerate(draw.moments.tolist() if own else []):
            for w, key in enumerate(windows):
                _, start, end = key
                if key[0] != draw.video:
                    continue
                if start <= begin and finish <= end:
                    rows = moment_rows(*sources[w], end - start, begin - start, finish - start)
                    pairs.append((first + s, w, 1.0, own.get(key, -1), rows))
                elif end <= begin or start >= finish:
                    pairs.append((first + s, w, 0.0, own.get(key, -1), real_rows(*sources[w])))
        first += count
    query, window, labels, order, rows = zip(*pairs) if pairs else ((), (), (), (), ())
    return {"ranked": RankedWindows(feats=torch.stack(feats), query=torch.tensor(query, dtype=torch.long),
                                    window=torch.tensor(window, dtype=torch.long),
                                    labels=torch.tensor(labels, dtype=torch.float32),
                                    order=torch.tensor(order, dtype=torch.long),
                                    rows=torch.tensor(rows, dtype=torch.long).reshape(-1, 2))}


def real_rows(sources, raw_rows):
    """(0, the rows made from the window's ``raw_rows`` on disk): a window padded after its real rows
    (a clip input of variable length) is scored on those alone."""
    return 0, int((sources[:, 0] < raw_rows).sum())


def moment_rows(sources, raw_rows, seconds, begin, finish):
    """The rows [first, last) of a window, as the model takes it, that a moment ``begin``-``finish`` s
    into it covers: those made from any of the window's rows on disk (``raw_rows`` over ``seconds``)
    that the moment overlaps (tan.data.features.rows.window_rows). ``sources`` [P, 2]: the rows on disk
    each row is made from (the clip input's row_sources). A clip input that samples rows may leave all
    of the moment's out: then the row made from the rows nearest it."""
    low, high, _, _ = window_rows(raw_rows, seconds, begin, finish)
    covered = np.flatnonzero((sources[:, 0] < high) & (sources[:, 1] > low))
    if not len(covered):
        covered = [int(np.argmin(np.abs(sources.sum(1) - (low + high))))]
    return int(covered[0]), int(covered[-1]) + 1


class BatchCollator:
    """Stacks features and pads sentences; ``wordlens`` keeps each real length."""

    def __call__(self, items):
        queries, wordlens = pad_sentences([it["query"] for it in items], items[0]["query"].shape[-1])
        return {
            **stack_clips(items),  # feats [B, P, D_in] (+ clip_counts, clip_offsets)
            "queries": queries,  # [B, L, E]
            "wordlens": wordlens,  # [B]
            "moments": torch.stack([it["moment"] for it in items]),  # [B, 2], the first window
            "gt_moments": pad_moments([it["gt_moments"] for it in items]),  # [B, W, 2], every ground-truth moment
            "durations": torch.tensor([it["duration"] for it in items], dtype=torch.float32),  # [B]
            "indices": torch.tensor([it["index"] for it in items], dtype=torch.long),  # [B]
            **collate_ranked(items, [1] * len(items)),
        }


class VideoBatchCollator:
    """Videos with their sentences -> one batch: V videos' features and the S
    sentences of all of them, grouped by video in order; ``video_index`` [S]
    names each sentence's video."""

    def __call__(self, items):
        sentences = [q for it in items for q in it["queries"]]
        queries, wordlens = pad_sentences(sentences, sentences[0].shape[-1])
        counts = torch.tensor([len(it["queries"]) for it in items])
        return {
            "feats": torch.stack([it["feats"] for it in items]),  # [V, P, D_in]
            "queries": queries,  # [S, L, E] or [S, L] ids
            "wordlens": wordlens,  # [S]
            "video_index": torch.repeat_interleave(torch.arange(len(items)), counts),  # [S]
            "moments": torch.cat([it["moments"] for it in items]),  # [S, 2], the first window
            "gt_moments": pad_moments([m for it in items for m in it["gt_moments"]]),  # [S, W, 2]
            "durations": torch.cat([it["durations"] for it in items]).float(),  # [S]
            "indices": torch.cat([it["indices"] for it in items]),  # [S]
            **collate_ranked(items, [len(it["queries"]) for it in items]),
        }
