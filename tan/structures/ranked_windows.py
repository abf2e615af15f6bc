"""The windows of a long video that a training sentence is ranked in (INPUT.TRAIN_WINDOW.RANKED_WINDOWS,
docs/long_videos.md): what one item draws (:class:`RankedDraw`, tan.data.MomentDataset) and what a
batch joins of them (:class:`RankedWindows`, tan.data.collate.collate_ranked), which the model's
cross-window losses read (tan.modeling.window_losses)."""
from dataclasses import dataclass, fields
from typing import Tuple

import torch


@dataclass
class RankedDraw:
    """The ranked windows one item drew, the first holding its moment.

    ``feats`` [R, P, D_in]: each window's rows as the model takes a window; ``sources`` [R, P, 2]: the
    rows on disk each of them is made from (the clip input's row_sources); ``raw_rows`` [R]: each
    window's rows on disk; ``spans`` [R, 2] float64: their seconds in the video; ``video``: (the
    dataset's key, the video's id), which says when two items' windows coincide; ``moments`` [S_i, 2]
    float64: the moments of the item's sentences, in the video's seconds."""
    feats: torch.Tensor
    sources: torch.Tensor
    raw_rows: torch.Tensor
    spans: torch.Tensor
    video: Tuple[int, int]
    moments: torch.Tensor


@dataclass
class RankedWindows:
    """A batch's ranked windows, each once, and the (sentence, window) pairs ranked.

    ``feats`` [U, P, D_in]: the batch's distinct windows; per pair, [M] each: ``query`` the sentence's
    place in the batch, ``window`` the window's place in ``feats``, ``labels`` 1.0 where the window holds
    the sentence's whole moment and 0.0 where it shares no second with it, ``order`` the window's place
    among those the sentence's own item drew (0 the one holding the moment, 1 and 2 its nearest
    neighbours; -1 another item's window of the same video); ``rows`` [M, 2]: the rows [first, last)
    of the window that the moment covers where the window holds it, else all its real rows."""
    feats: torch.Tensor
    query: torch.Tensor
    window: torch.Tensor
    labels: torch.Tensor
    order: torch.Tensor
    rows: torch.Tensor

    def __len__(self):
        """The number of pairs ranked."""
        return len(self.query)

    def to(self, device, non_blocking=False):
        return RankedWindows(**{f.name: getattr(self, f.name).to(device, non_blocking=non_blocking)
                                for f in fields(self)})

    def pin_memory(self):
        """Pinned copies (a DataLoader with pin_memory calls this on each batch's parts)."""
        return RankedWindows(**{f.name: getattr(self, f.name).pin_memory() for f in fields(self)})

    def pairs_where(self, keep):
        """(query, window, labels) of the pairs where ``keep`` [M] is True."""
        return self.query[keep], self.window[keep], self.labels[keep]
