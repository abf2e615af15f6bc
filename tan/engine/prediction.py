"""Ask a trained model about one video: sentences in, top moments (seconds) out.

The inputs (a video's features and duration, sentences as word vectors) come
from tan.data (VideoSource, SentenceEncoder); this module runs the model on
them and keeps the top moments as the evaluation does."""
import os

import numpy as np
import torch

from ..data.features import l2_normalize_rows, resample
from ..errors import TanError
from ..modeling import build_model
from ..utils.checkpoint import BEST, last_checkpoint, load_model_weights, model_state_from, read_checkpoint
from .evaluation import top_moments
from .precision import autocast


def default_checkpoint(cfg):
    """OUTPUT_DIR/model_best.pth, else the latest checkpoint there; an error when there is none."""
    best = os.path.join(cfg.OUTPUT_DIR, BEST)
    if os.path.isfile(best):
        return best
    last = last_checkpoint(cfg.OUTPUT_DIR)
    if last:
        return last
    raise TanError(f"no checkpoint given (--ckpt) and none in OUTPUT_DIR {cfg.OUTPUT_DIR!r}; "
                   f"train first or pass --ckpt PATH")


def load_trained_model(cfg, checkpoint, device):
    model = build_model(cfg)
    load_model_weights(model, model_state_from(read_checkpoint(checkpoint), checkpoint), checkpoint)
    return model.to(device).eval()


@torch.no_grad()
def predict(model, cfg, feats, duration, encoded_sentences, device, topk=5):
    """Top moments of each sentence over one video.

    feats: [T, D_in] raw clip features; encoded_sentences: list of [L, E].
    Returns (moments [S, topk, 2] seconds, scores [S, topk], filled [S, topk],
    score maps [S, N, N]), all on the CPU.
    """
    expected = cfg.MODEL.TAN.FEATPOOL.INPUT_SIZE
    if feats.ndim != 2 or feats.shape[1] != expected or feats.shape[0] == 0:
        raise TanError(f"features of shape {tuple(feats.shape)}; expected [T, {expected}] "
                       f"(MODEL.TAN.FEATPOOL.INPUT_SIZE) with T >= 1")
    if not np.isfinite(feats).all():
        raise TanError("the video's features hold NaN or infinite values")
    if not duration or duration <= 0:
        raise TanError(f"the video's duration must be a positive number of seconds, got {duration!r}")
    prepared = torch.from_numpy(resample(l2_normalize_rows(feats), cfg.INPUT.NUM_PRE_CLIPS))
    count = len(encoded_sentences)
    lengths = torch.tensor([len(q) for q in encoded_sentences])
    queries = torch.zeros(count, int(lengths.max()), cfg.INPUT.PRE_QUERY_SIZE)
    for row, q in enumerate(encoded_sentences):
        queries[row, :len(q)] = torch.from_numpy(q)
    with autocast(cfg.SOLVER.AMP, device):
        logits = model(prepared[None].expand(count, -1, -1).to(device), queries.to(device), lengths)
    scores = model.scores(logits)
    durations = torch.full((count,), float(duration), device=device)
    moments, kept_scores, filled = top_moments(scores, durations, cfg.TEST.NMS_THRESH, topk, model.mask2d,
                                               units=cfg.TEST.NMS_UNITS)
    return moments.cpu(), kept_scores.cpu(), filled.cpu(), scores.cpu()


@torch.no_grad()
def predict_dataset_queries(model, cfg, dataset, indices, device, topk=5):
    """For dataset queries: (score map [N, N], kept moments [k, 2] s, their scores [k]) each, on the CPU."""
    for index in indices:
        item = dataset[index]
        with autocast(cfg.SOLVER.AMP, device):
            logits = model(item["feats"][None].to(device), item["query"][None].to(device),
                           torch.tensor([len(item["query"])]))
        scores = model.scores(logits)
        moments, kept, filled = top_moments(scores, torch.tensor([item["duration"]], device=device),
                                            cfg.TEST.NMS_THRESH, topk, model.mask2d, units=cfg.TEST.NMS_UNITS)
        yield scores[0].cpu(), moments[0][filled[0]].cpu(), kept[0][filled[0]].cpu()
