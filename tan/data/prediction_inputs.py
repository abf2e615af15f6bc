"""What prediction feeds a model: one video's features and duration, from a
run's configured data (or files given directly), and sentences as
word-vector sequences, from the index of the word-vector file (or as word
pieces, for MMN's BERT encoder)."""
import os

import numpy as np

from ..config.architecture import text_encoder_name
from ..errors import TanError, UnknownVideoError
from ..utils.logger import get_logger
from .array_files import read_array
from .build import RunData, word_vector_cache_dir
from .catalog import resolve_path
from .feature_sources import NPZ_KEY, open_source
from .text import tokenize
from .word_index import WordVectorIndex
from .word_pieces import WordPieces


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
                return _one_video_array(features_file, feature_key)
            if not video:
                raise TanError(f"--features {features_file!r} holds many videos: name the video with --video")
            source = open_source(features_file, feature_key, key_field="--feature-key")
            if not source.shapes([video]):
                raise UnknownVideoError(f"video {video!r} is not in {source!r}")
            return source.read(video)
        if not video:
            raise TanError("give --video ID (a video of the configured datasets) or --features FILE")
        return self.run_data.video_features(video)

    def duration(self, video):
        """Seconds, from the annotations of the configured datasets; None when not found."""
        return self.run_data.video_duration(video)


def _one_video_array(path, key):
    """The [T, D] float32 array of a one-video .npy or .npz file (``key``, default "features")."""
    try:
        return read_array(path, key or NPZ_KEY, "--feature-key")
    except TanError as e:
        raise TanError(f"--features: {e}") from None


class SentenceEncoder:
    """Sentences -> word-vector sequences, from the index of the whole
    word-vector file (:class:`~tan.data.word_index.WordVectorIndex`, built
    in ``cache_dir`` on first use): any word costs a lookup, and no dataset's
    annotations are read. A word's vector is the row the datasets'
    vocabulary gets from the same file."""

    def __init__(self, word_vectors_path, dim, cache_dir):
        self.path = word_vectors_path
        self.dim = dim
        self.index = WordVectorIndex.open(word_vectors_path, dim, cache_dir)
        self.known = {}  # words looked up so far (found ones only)

    @classmethod
    def from_config(cls, cfg):
        """INPUT.WORD_VECTORS (relative to DATASETS.ROOT), INPUT.PRE_QUERY_SIZE and the word-vector cache folder."""
        path = resolve_path(cfg.DATASETS.ROOT, cfg.INPUT.WORD_VECTORS)
        if not os.path.isfile(path):
            RunData(cfg).prepare()  # a generated dataset (the synthetic one) writes its word-vector file
        return cls(path, cfg.INPUT.PRE_QUERY_SIZE, word_vector_cache_dir(cfg))

    def __call__(self, sentences):
        tokens = [tokenize(s) for s in sentences]
        self.known.update(self.index.lookup({t for ts in tokens for t in ts} - set(self.known)))
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


def sentence_encoder(cfg):
    """How prediction encodes sentences for the model of ``cfg``: GloVe vectors
    (:class:`SentenceEncoder`), or word-piece ids for MMN's BERT encoder. A model
    trained on precomputed sentence features cannot read new text: the text
    encoder that made those features is not part of it."""
    if cfg.INPUT.SENTENCE_FEATURES:
        raise TanError("this model was trained on precomputed sentence features (INPUT.SENTENCE_FEATURES True), "
                       "so it cannot encode new sentences; evaluate it on datasets with text_features "
                       "(tan-test), or train with word vectors to ground free text")
    if text_encoder_name(cfg) == "BERT":
        return WordPieces.from_config(cfg)
    return SentenceEncoder.from_config(cfg)
