"""The Python API: a trained model that finds the moments sentences describe.

    import tan
    model = tan.load_model("outputs/synthetic/model_final.pth", device="cpu")
    video = model.encode_video(features, duration=61.5)     # features: [T, D_in] array
    video = model.encode_video_file("cooking.mp4")           # or a video file (features made as recorded)
    for moments in model.ground(video, ["the cook holds the pan.", "she opens the door."], topk=5):
        print([(m.start, m.end, m.score) for m in moments])

A video is encoded once (its 2D map of candidate moments); any number of
sentences are then scored against it in batches. Moments are in seconds,
best first, after the same NMS as the evaluation (TEST.NMS_THRESH).

A video longer than those the model was trained on is grounded by windows
of the trained length (TEST.WINDOW, docs/long_videos.md): its windows are
encoded batch by batch when sentences are asked, so that memory follows the
batch of windows, not the video's length.
"""
from dataclasses import dataclass

import torch

from .config.stored import checkpoint_config
from .utils.checkpoint_file import read_checkpoint, stored_extractors, stored_trained_span
from .data import sentence_encoder
from .data.prediction_inputs import reads_backbone_features
from .engine.prediction import (SENTENCE_BATCH, check_duration, check_sentences, checked_features, encode_video,
                                ground_and_draw, ground_sentences, ground_windowed, load_trained_model,
                                window_picture)
from .engine.long_videos.relevance_stage import relevance_stage
from .engine.long_videos.windows import WindowedVideo, describe_windows, window_settings
from .engine.wrappers import unwrap
from .engine.precision import amp_is_emulated, slow_amp_warning
from .errors import TanError
from .utils.logger import get_logger

__all__ = ["Moment", "EncodedVideo", "Answer", "Grounder", "load_model"]


@dataclass(frozen=True)
class Moment:
    """A moment of a video: start and end in seconds, and the model's score in [0, 1]."""
    start: float
    end: float
    score: float


@dataclass(frozen=True)
class EncodedVideo:
    """A video as the model sees it: its 2D map (on the model's device) and its duration; for a
    video grounded by windows, no map but ``windows`` (tan.engine.long_videos.windows.WindowedVideo: its
    features and windows, each encoded when sentences are asked)."""
    map2d: torch.Tensor
    duration: float
    windows: WindowedVideo = None


@dataclass(frozen=True)
class Answer:
    """One sentence's answer: its top moments (best first) and the whole score map they came from
    (a tan.structures.candidates.ScoreMap on the CPU: values and valid cells [R, C], each cell's
    start and end in seconds, and what its rows and columns stand for)."""
    sentence: str
    moments: list
    score_map: object


class Grounder:
    """A trained model with what it needs to answer: its config, device and word vectors.

    Build one with :func:`load_model`."""

    def __init__(self, model, cfg, device, checkpoint="", extractors=None, extractor_models=None,
                 trained_span=None):
        """``extractors``: how the training features were made (the checkpoint's records, None if it
        has none); ``extractor_models``: {recorded model name: where it is now}, for moved folders;
        ``trained_span``: what the training videos last (the checkpoint's record), for windows."""
        self.model = model
        self.cfg = cfg
        self.text_input = unwrap(model).text_input(cfg)  # how the model reads sentences, asked of it once
        self.device = device
        self.checkpoint = checkpoint
        self.extractors = extractors
        self._records_looked_up = False  # in the training data's folders, for a checkpoint without records
        self.extractor_models = dict(extractor_models or {})
        self._encoder = None
        self._featurizer = None
        self.windows, choice = window_settings(cfg, trained_span)
        stage = relevance_stage(cfg, model) if self.windows is not None else None
        get_logger("api").info("long videos: %s%s", choice, f"; {stage.describe()}" if stage else "")

    def encode_video_file(self, path):
        """A video file, its features made by the extractors the training features came from
        (the same backbones, weights and sampling; the ``video`` extra), its duration read from it."""
        if self._featurizer is None:
            from .video.featurize import VideoFeaturizer

            self._featurizer = VideoFeaturizer(self._extractor_records(), self.device, self.extractor_models)
        features, duration = self._featurizer(path)
        return self.encode_video(features, duration)

    def _extractor_records(self):
        if self.extractors is None and not self._records_looked_up:
            self._records_looked_up = True
            self.extractors = self._records_in_training_folders()
        return self.extractors

    def _records_in_training_folders(self):
        """For a checkpoint that records no extractor: the records now in its training data's folders
        (written there since, e.g. by tan-extract-features --preset --records-only), if they are here."""
        from .data.build import RunData

        try:
            records = RunData(self.cfg, splits=("TRAIN",)).extractors()
        except TanError:
            return None
        if records is not None:
            get_logger("api").warning("the checkpoint records no feature extractor; using the records now in its "
                                      "training data's folders (DATASETS.ROOT %s)", self.cfg.DATASETS.ROOT)
        return records

    def encode_video(self, features, duration):
        """``features``: the video's clip features [T, D_in] (numpy array or tensor, any T);
        ``duration``: its length in seconds. A video longer than TEST.WINDOW allows is kept for
        windowed grounding instead of being encoded whole."""
        duration = check_duration(duration)
        if self.windows is not None and self.windows.applies_to(duration):
            features = checked_features(self.model, self.cfg, features)
            windowed = WindowedVideo.of(features, duration, self.windows)
            get_logger("api").info("%s", describe_windows(duration, windowed.spans, len(features), self.windows))
            if len(windowed.spans) > 1:
                return EncodedVideo(None, duration, windowed)
            # its rows are no more than one window takes: every window would hold the same rows
        return EncodedVideo(encode_video(self.model, self.cfg, features, self.device), duration)

    def encode_sentences(self, sentences):
        """Sentences -> word-vector sequences [L, E] (GloVe, from the word-vector index;
        docs/data.md; unknown words are zero vectors, with a warning), or word-piece
        ids [L]: as the model's text input encodes them."""
        sentences = check_sentences(list(sentences))
        if self._encoder is None:
            self._encoder = self._recorded_text_encoder() or sentence_encoder(self.cfg, self.text_input)
        return self._encoder(sentences)

    def _recorded_text_encoder(self):
        """For a model that reads a text backbone's token features: that backbone, as the checkpoint
        records it (None without a record: the text input says why it cannot encode new text)."""
        if not reads_backbone_features(self.text_input):
            return None
        record = (self._extractor_records() or {}).get("text_features")
        if record is None:
            return None
        from .video.featurize import SentenceFeaturizer  # the video extra, needed only here

        return SentenceFeaturizer(record, self.device, self.extractor_models)

    def ground(self, video, sentences, topk=5, batch_size=SENTENCE_BATCH):
        """Top ``topk`` moments of each sentence in ``video`` (an :class:`EncodedVideo`):
        a list (one per sentence) of lists of :class:`Moment`, best first; fewer than
        ``topk`` when fewer candidates score above zero."""
        self._check_question(video, sentences, "ground")
        if video.windows is not None:
            moments, scores, filled, _ = ground_windowed(self.model, self.cfg, video.windows,
                                                         self.encode_sentences(sentences), self.device, topk,
                                                         batch_size)
            return [_moments(ms, ss, fs) for ms, ss, fs in zip(moments, scores, filled)]
        moments, scores, filled, _ = ground_sentences(self.model, self.cfg, video.map2d, video.duration,
                                                      self.encode_sentences(sentences), self.device, topk,
                                                      batch_size)
        return [_moments(ms, ss, fs) for ms, ss, fs in zip(moments, scores, filled)]

    def answers(self, video, sentences, topk=5, batch_size=SENTENCE_BATCH):
        """:meth:`ground` and :meth:`score_maps` in one pass: an :class:`Answer` per sentence."""
        self._check_question(video, sentences, "answers")
        if video.windows is not None:  # each sentence's picture: the window its best moment came from
            encoded = self.encode_sentences(sentences)
            moments, scores, filled, best = ground_windowed(self.model, self.cfg, video.windows, encoded,
                                                            self.device, topk, batch_size)
            pictures = [window_picture(self.model, self.cfg, video.windows, max(int(w), 0), e, self.device)
                        for w, e in zip(best, encoded)]
            return [Answer(sentence, _moments(ms, ss, fs), picture)
                    for sentence, ms, ss, fs, picture in zip(sentences, moments, scores, filled, pictures)]
        moments, scores, filled, pictures = ground_and_draw(self.model, self.cfg, video.map2d, video.duration,
                                                            self.encode_sentences(sentences), self.device, topk,
                                                            batch_size)
        return [Answer(sentence, _moments(ms, ss, fs), picture)
                for sentence, ms, ss, fs, picture in zip(sentences, moments, scores, filled, pictures)]

    @staticmethod
    def _check_question(video, sentences, method):
        if isinstance(sentences, str):
            raise TanError(f"{method}() takes a list of sentences; wrap a single one in a list")
        if not isinstance(video, EncodedVideo):
            raise TanError(f"{method}() takes the result of encode_video(features, duration) as its video")

    def score_maps(self, video, sentences, batch_size=SENTENCE_BATCH):
        """The full score maps [S, R, C] as the model draws them (CPU, 0 outside valid cells).
        For a start x end map (R = C = N), cell (i, j) is the moment from clip i to the end
        of clip j, of duration / N seconds each; a model of another layout says what its
        rows and columns are (docs/models.md). A video grounded by windows has no whole map:
        use :meth:`answers`, which draws the window of each sentence's best moment."""
        if video.windows is not None:
            raise TanError("score_maps(): this video is grounded by windows (TEST.WINDOW) and has no whole map; "
                           "answers() gives each sentence the map of the window its best moment came from")
        *_, maps = ground_sentences(self.model, self.cfg, video.map2d, video.duration,
                                    self.encode_sentences(sentences), self.device, 1, batch_size)
        return maps


def _moments(moments, scores, filled):
    return [Moment(float(m[0]), float(m[1]), float(s)) for m, s, f in zip(moments, scores, filled) if f]


def load_model(checkpoint, device="cpu", config_file=None, overrides=(), extractor_models=None):
    """A :class:`Grounder` from a checkpoint.

    ``config_file``: only for checkpoints that carry no config (the reference's);
    ``overrides``: KEY VALUE pairs, e.g. ``["TEST.NMS_THRESH", "0.5"]``. ``device``:
    "cpu", "cuda", "cuda:1" or a torch.device. ``extractor_models``: {recorded model name (or
    its folder's name): folder}, where a feature extractor's model has moved since training."""
    cfg = checkpoint_config(checkpoint, config_file, list(overrides))
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise TanError(f"device {device!r}: expected 'cpu', 'cuda', 'cuda:N' or a torch.device") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TanError(f"device {str(device)!r}: CUDA is not available on this machine")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise TanError(f"device {str(device)!r}: only {torch.cuda.device_count()} GPU(s) are visible")
    if amp_is_emulated(cfg.SOLVER.AMP, device):
        get_logger("api").warning("%s", slow_amp_warning(cfg.SOLVER.AMP))
    stored = read_checkpoint(checkpoint)
    return Grounder(load_trained_model(cfg, checkpoint, device), cfg, device, checkpoint, stored_extractors(stored),
                    extractor_models, stored_trained_span(stored))
