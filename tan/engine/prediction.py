"""Ask a trained model about one video: sentences in, top moments (seconds) out."""
import os

import numpy as np
import torch

from ..data.annotations import load_annotations
from ..data.build import _catalog_entries, _configured_names, build_vocabulary
from ..data.catalog import resolve_path
from ..data.features import FeatureFile, l2_normalize_rows, resample
from ..data.text import read_word_vectors, tokenize
from ..errors import TanError
from ..modeling import build_model
from ..utils.checkpoint import BEST, Checkpointer, load_model_weights, model_state_from, read_checkpoint
from ..utils.logger import get_logger
from .evaluation import top_moments
from .precision import autocast


def default_checkpoint(cfg):
    """OUTPUT_DIR/model_best.pth, else the latest checkpoint there; an error when there is none."""
    best = os.path.join(cfg.OUTPUT_DIR, BEST)
    if os.path.isfile(best):
        return best
    last = Checkpointer(torch.nn.Module(), save_dir=cfg.OUTPUT_DIR).last_checkpoint() if os.path.isdir(
        cfg.OUTPUT_DIR) else None
    if last:
        return last
    raise TanError(f"no checkpoint given (--ckpt) and none in OUTPUT_DIR {cfg.OUTPUT_DIR!r}; "
                   f"train first or pass --ckpt PATH")


def load_trained_model(cfg, checkpoint, device):
    model = build_model(cfg)
    load_model_weights(model, model_state_from(read_checkpoint(checkpoint), checkpoint), checkpoint)
    return model.to(device).eval()


class VideoSource:
    """Where a video's features and duration come from: the configured datasets,
    or a feature file (HDF5 or .npy) given directly."""

    def __init__(self, cfg):
        self.cfg = cfg
        names = _configured_names(cfg)
        self.entries = _catalog_entries(cfg, names) if names else []

    def features(self, video, features_file=None, feature_key="c3d_features"):
        """[T, D_in] float32 for ``video``."""
        if features_file:
            if features_file.endswith(".npy"):
                if not os.path.isfile(features_file):
                    raise TanError(f"--features file {features_file!r} not found")
                return np.asarray(np.load(features_file), dtype=np.float32)
            if not video:
                raise TanError(f"--features {features_file!r} is an HDF5 file: name the video with --video")
            source = FeatureFile(features_file, feature_key)
            if not source.shapes([video]):
                raise TanError(f"video {video!r} is not in {features_file!r}")
            return source.read(video)
        if not video:
            raise TanError("give --video ID (a video of the configured datasets) or --features FILE")
        for entry in self.entries:
            source = FeatureFile(entry["features"], entry.get("feature_key", "c3d_features"))
            if source.shapes([video]):
                return source.read(video)
        files = sorted({e["features"] for e in self.entries})
        raise TanError(f"video {video!r} is in none of the configured feature files ({', '.join(files) or 'none'}); "
                       f"pass --features FILE")

    def duration(self, video):
        """Seconds, from the annotations of the configured datasets; None when not found."""
        for entry in self.entries:
            queries, _ = load_annotations(entry["annotations"], entry["format"], entry.get("durations"))
            for q in queries:
                if q.video == video:
                    return q.duration
        return None


class SentenceEncoder:
    """Sentences -> word-vector sequences: the datasets' vocabulary (cached), plus
    the word-vector file for any word outside it (one pass over that file)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.dim = cfg.INPUT.PRE_QUERY_SIZE
        self.known = {}
        if _configured_names(cfg):
            vocabulary = build_vocabulary(cfg)
            self.known = {w: vocabulary.matrix[i] for w, i in vocabulary.index.items()}

    def __call__(self, sentences):
        tokens = [tokenize(s) for s in sentences]
        missing = {t for ts in tokens for t in ts} - set(self.known)
        if missing:
            path = resolve_path(self.cfg.DATASETS.ROOT, self.cfg.INPUT.WORD_VECTORS)
            self.known.update(read_word_vectors(path, missing, self.dim))
        encoded = []
        for sentence, ts in zip(sentences, tokens):
            unknown = [t for t in ts if t not in self.known]
            if len(unknown) == len(ts):
                raise TanError(f"sentence {sentence!r} has no word with a word vector "
                               f"({'no words' if not ts else 'unknown: ' + ', '.join(unknown)})")
            if unknown:
                get_logger("predict").warning("%r: no word vector for %s (zero vectors used)", sentence,
                                              ", ".join(unknown))
            encoded.append(np.stack([self.known.get(t, np.zeros(self.dim, np.float32)) for t in ts]))
        return encoded


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
    moments, kept_scores, filled = top_moments(scores, durations, cfg.TEST.NMS_THRESH, topk, model.mask2d)
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
                                            cfg.TEST.NMS_THRESH, topk, model.mask2d)
        yield scores[0].cpu(), moments[0][filled[0]].cpu(), kept[0][filled[0]].cpu()
