"""What prediction feeds a model: one video's features and duration, from a
run's configured data (or files given directly), and sentences as
the model's text input encodes them (word vectors from the index of the
word-vector file, or word pieces)."""
import os

import numpy as np

from ..errors import TanError, UnknownVideoError
from .catalog import field_paths
from .features.array_files import read_array
from .features.sources import NPZ_KEY, open_features, open_source
from .text.inputs import text_input_class


class VideoSource:
    """Where a video's features and duration come from: the configured datasets
    of ``run_data`` (a :class:`~tan.data.RunData`), or a feature file (HDF5 or
    .npy) given directly."""

    def __init__(self, run_data):
        self.run_data = run_data

    def features(self, video, features_file=None, feature_key=None):
        """[T, D_in] float32 for ``video``: from ``features_file`` when given (one video's
        .npy or .npz, or an HDF5 file or a folder of per-video files holding ``video``)."""
        if features_file:
            if features_file.endswith((".npy", ".npz")) and not os.path.isdir(features_file):
                if not os.path.isfile(features_file):
                    raise TanError(f"--features file {features_file!r} not found")
                return _finite(_one_video_array(features_file, feature_key), f"--features {features_file!r}")
            source = open_source(features_file, feature_key, key_field="--feature-key")
            if not video:
                raise TanError(f"--features {features_file!r} holds many videos: name the video with --video")
            if not source.shapes([video]):
                raise UnknownVideoError(f"video {video!r} is not in {source!r}")
            return _finite(source.read(video), f"video {video!r} in --features {features_file!r}")
        if not video:
            raise TanError("give --video ID (a video of the configured datasets) or --features FILE")
        return self.configured_features(video)

    def _present(self, key):
        """Entries of the run's datasets whose ``key`` file exists (or is generated on first use)."""
        self.run_data.prepare()
        entries = self.run_data.entries()
        return [e for e in entries if e.get("generator") or (e.get(key) and _exists(e[key]))], entries

    def configured_features(self, video):
        """[T, D_in] float32 features of ``video`` from the first configured feature file holding it
        (files that are absent are skipped: prediction may have only some splits on disk)."""
        present, entries = self._present("features")
        for entry in present:
            source = open_features(entry["features"], entry.get("feature_key"),
                                   self.run_data.cfg.INPUT.FEATURE_LENGTH_TOLERANCE)
            if source.shapes([video]):
                return _finite(source.read(video), f"video {video!r} in {_describe(entry['features'])!r}")
        files = sorted({_describe(e["features"]) for e in present})
        absent = sorted({_describe(e["features"]) for e in entries} - set(files))
        raise UnknownVideoError(f"video {video!r} is in none of the configured feature files "
                                f"({', '.join(files) or 'none'}{'; not on disk: ' + ', '.join(absent) if absent else ''}"
                                f"); pass --features FILE")

    def duration(self, video):
        """Seconds, from the annotations of the configured datasets that are on disk; None when not found."""
        for entry in self._present("annotations")[0]:
            for q in self.run_data.queries(entry["name"])[0]:
                if q.video == video:
                    return q.duration
        return None


def _finite(features, what):
    """``features`` [T, D], refused naming ``what`` (the video and its file) when a row holds NaN or an
    infinite value: the model's every score would be NaN, and its answer meaningless."""
    bad = ~np.isfinite(features).all(axis=tuple(range(1, features.ndim)))
    if bad.any():
        rows = np.flatnonzero(bad)
        raise TanError(f"{what} holds NaN or infinite values in {len(rows)} of its {len(features)} feature rows "
                       f"(first: row {rows[0]}); extract that video's features again")
    return features


def _describe(paths):
    """A catalog entry's features for a message: one path, or the streams joined by " + "."""
    return " + ".join(field_paths(paths))


def _exists(paths):
    """Whether every path (one, or a list of feature streams) is on disk, as a file or a folder."""
    return all(os.path.exists(p) for p in field_paths(paths))


def _one_video_array(path, key):
    """The [T, D] float32 array of a one-video .npy or .npz file (``key``, default "features")."""
    try:
        return read_array(path, key or NPZ_KEY, "--feature-key")
    except TanError as e:
        raise TanError(f"--features: {e}") from None


def sentence_encoder(cfg, text_input):
    """How prediction encodes sentences for a model whose text input is ``text_input`` (what
    its ``text_input(cfg)`` declares): as that input does (word vectors: :class:`SentenceEncoder`;
    word pieces: the tokenizer). A model trained on precomputed sentence features needs the
    text backbone that made them (tan.api uses the one its checkpoint records, see
    :func:`reads_backbone_features`)."""
    return text_input_class(text_input).sentence_encoder(cfg, text_input)


def reads_backbone_features(text_input):
    """Whether a model whose text input is ``text_input`` reads sentences as token features that a
    text backbone made."""
    return text_input_class(text_input).READS_BACKBONE_FEATURES
