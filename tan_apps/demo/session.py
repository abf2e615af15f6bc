"""The demo's model work: a checkpoint is loaded when first chosen, a video file's features are
made once per model (by the extractors its checkpoint records), and sentences come back as the
JSON the page draws: top moments and the score map."""
import os
import threading
import time
from collections import OrderedDict

import numpy as np

from tan.api import load_model
from tan.data.features.provenance import describe_extractor
from tan.engine.prediction import check_sentences, empty_sentence_message
from tan.errors import TanError
from tan.video.extract import VIDEO_EXTENSIONS

MODELS_KEPT = 2  # loaded models held at once (the least recently used goes first)
VIDEOS_KEPT = 16  # encoded videos (2D maps) held, over all models
MAX_SENTENCES = 32
MAX_SENTENCE_CHARS = 500
MAX_TOPK = 20


class DemoSession:
    """Checkpoints by id, the video shelf (offer.VideoShelf), and the device the models run on."""

    def __init__(self, checkpoints, videos, device, extractor_models=None):
        self.checkpoints = {c.id: c for c in checkpoints}
        self.videos = videos
        self.device = device
        self.extractor_models = dict(extractor_models or {})
        self._work = threading.Lock()  # one model job at a time: they share the device and its memory
        self._models = OrderedDict()
        self._encoded = OrderedDict()

    def offer(self):
        """What the page lists: checkpoints (by run) and videos."""
        return {"checkpoints": [{"id": c.id, "run": c.run, "name": c.name} for c in self.checkpoints.values()],
                "videos": [v.as_json() for v in self.videos.all()], "device": str(self.device),
                "max_upload_bytes": self.videos.max_upload_bytes, "video_extensions": list(VIDEO_EXTENSIONS),
                "max_topk": MAX_TOPK, "max_sentences": MAX_SENTENCES}

    def checkpoint(self, checkpoint_id):
        try:
            return self.checkpoints[checkpoint_id]
        except KeyError:
            raise TanError(f"checkpoint {checkpoint_id!r}: not one of the page's checkpoints (reload the page)") from None

    def checkpoint_info(self, checkpoint_id):
        """The chosen checkpoint, loaded: its model and how it reads video files and sentences."""
        choice = self.checkpoint(checkpoint_id)
        with self._work:
            model = self._model(choice)
        records = model.extractors or {}
        text = records.get("text_features")
        readable = _reads_video_files(model)
        return {"id": choice.id, "run": choice.run, "name": choice.name,
                "architecture": model.cfg.MODEL.ARCHITECTURE,
                "video_features": [describe_extractor(r) for r in records.get("features") or [] if r is not None],
                "text_features": describe_extractor(text) if text else None,
                "reads_video_files": readable, "why_not": None if readable else _no_records(choice)}

    def ground(self, checkpoint_id, video_id, sentences, topk):
        """Top ``topk`` moments and the score map of each sentence in the video, as JSON."""
        sentences, topk = _question(sentences, topk)
        choice, video = self.checkpoint(checkpoint_id), self.videos.get(video_id)
        with self._work:
            model = self._model(choice)
            if not _reads_video_files(model):
                raise TanError(_no_records(choice))
            started = time.perf_counter()
            encoded, cached = self._encode(model, choice, video)
            encoding = time.perf_counter() - started
            answers = model.answers(encoded, sentences, topk)
            grounding = time.perf_counter() - started - encoding
        return {"checkpoint": choice.id, "video": {**video.as_json(), "duration": encoded.duration},
                "seconds": {"features": round(encoding, 3), "grounding": round(grounding, 3)}, "cached": cached,
                "map": _cells(answers[0].score_map),
                "answers": [{"sentence": a.sentence, "moments": [{"start": m.start, "end": m.end, "score": m.score}
                                                                for m in a.moments],
                             "scores": _scores(a.score_map)} for a in answers]}

    def _model(self, choice):
        if choice.id not in self._models:
            self._models[choice.id] = load_model(choice.path, self.device, extractor_models=self.extractor_models)
            while len(self._models) > MODELS_KEPT:
                dropped, _ = self._models.popitem(last=False)
                for key in [k for k in self._encoded if k[0] == dropped]:
                    del self._encoded[key]
        self._models.move_to_end(choice.id)
        return self._models[choice.id]

    def _encode(self, model, choice, video):
        # the file's size and time are part of the key: a video replaced on disk is encoded again
        key = (choice.id, video.id, *_file_stamp(video.path))
        cached = key in self._encoded
        if not cached:
            self._encoded[key] = model.encode_video_file(video.path)
            while len(self._encoded) > VIDEOS_KEPT:
                self._encoded.popitem(last=False)
        self._encoded.move_to_end(key)
        return self._encoded[key], cached


def _file_stamp(path):
    try:
        info = os.stat(path)
    except OSError:
        return None, None  # gone: encoding it says why
    return info.st_size, info.st_mtime_ns


def _reads_video_files(model):
    """Whether the checkpoint records how every feature stream of its training data was made."""
    streams = (model.extractors or {}).get("features") or []
    return bool(streams) and all(r is not None for r in streams)


def _no_records(choice):
    return (f"{choice.run}/{choice.name} does not say how its training features were made (they were not "
            f"written by tan-extract-features), so the demo cannot make a video file's features for it; "
            f"use tan-predict --features with features made as the training ones were")


def _question(sentences, topk):
    if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
        raise TanError("sentences: expected a list of strings")
    if not sentences:
        raise TanError(empty_sentence_message("", "the sentence"))
    # The page leaves out the blank lines between its sentences; one that arrives blank is refused by its
    # number, as tan-predict and the API refuse it, rather than dropped (the numbers would shift)
    sentences = check_sentences([s.strip() for s in sentences])
    if len(sentences) > MAX_SENTENCES:
        raise TanError(f"{len(sentences)} sentences: the page asks at most {MAX_SENTENCES} at a time")
    long = [s for s in sentences if len(s) > MAX_SENTENCE_CHARS]
    if long:
        raise TanError(f"a sentence of {len(long[0])} characters: at most {MAX_SENTENCE_CHARS}")
    if isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= MAX_TOPK:
        raise TanError(f"topk {topk!r}: expected a whole number from 1 to {MAX_TOPK}")
    return sentences, topk


def _cells(picture):
    """The map's layout, shared by the sentences of one video: each cell's moment (seconds, row by row)."""
    rows, cols = picture.values.shape
    return {"rows": rows, "cols": cols, "row_label": picture.row_label, "col_label": picture.col_label,
            "starts": np.round(picture.starts.double().numpy(), 3).ravel().tolist(),
            "ends": np.round(picture.ends.double().numpy(), 3).ravel().tolist()}


def _scores(picture):
    """One sentence's cell scores, row by row; null where a cell is not a candidate."""
    values = np.round(picture.values.double().numpy(), 5).ravel().tolist()
    valid = np.broadcast_to(picture.valid.numpy(), picture.values.shape).ravel().tolist()
    return [v if ok else None for v, ok in zip(values, valid)]
