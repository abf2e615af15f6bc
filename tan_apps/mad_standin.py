"""A generated stand-in of MAD (docs/long_videos.md, "MAD"): its files in the release's layout,
with movies of the release's length (one to two and a half hours) and planted features, so that its
configs train and test here.

No MAD file can be downloaded here (the release is given on request). This writes, under
DATASETS.ROOT:

* ``mad/annotations/MAD_{train,val,test}.json``: one object per split, query id -> ``movie``,
  ``sentence`` (in the style of an audio description: "Someone opens the door of the car."),
  ``timestamps`` and ``ext_timestamps`` (here the former widened by a fraction of a second at
  each end, a few of them of no length) and ``movie_duration``; moments of a few seconds, as the
  release's (about 4 s on average);
* ``mad/features/CLIP_frames_features_5fps.h5``: a dataset per movie of 5 rows a second, noise
  with each query's words' patterns planted in its moment (the stand-ins' signal,
  tan_apps/standin.py);
* ``mad/features/CLIP_language_tokens_features.h5``: a dataset per query id, one row per word of
  its sentence (a vector of the word's own, of the frames' width), the layout of the release's CLIP
  token features (INPUT.SENTENCE_FEATURES True);
* ``glove/glove.840B.300d.txt``: word vectors of the sentences' words.

By default a tenth of the release's movies with its queries per movie; ``movies_per_split`` and
``queries_per_movie`` make a smaller one.
"""
import json
import os

import h5py
import numpy as np

from tan.data.catalog import builtin_entries
from tan.data.formats.common import Query
from tan.data.tokens import tokenize
from tan.errors import TanError
from tan.utils.io import atomic_write_text, replaced_when_done
from tan.utils.logger import get_logger

from .standin import WORD_VECTORS, _pattern, _signal_words, _word_vector, _write_features

# The release: 488 / 50 / 72 movies with about 280k / 32k / 72k queries; the stand-in keeps a tenth of
# the movies and the release's queries per movie.
RELEASE_MOVIES = {"train": 488, "val": 50, "test": 72}
MAD_MOVIES = {split: max(1, round(count / 10)) for split, count in RELEASE_MOVIES.items()}
QUERIES_PER_MOVIE = {"train": 574, "val": 641, "test": 1000}
MINUTES = (60.0, 150.0)  # a movie's length, uniform (the release's: 47 minutes to 3 hours, 110 on average)
ROWS_PER_SECOND = 5.0  # CLIP frames at 5 fps
DIM = 512  # CLIP ViT-L/14's
NO_LENGTH = 0.002  # the share of queries whose ext_timestamps have no length

_SUBJECTS = ("someone", "she", "he", "the man", "the woman", "the boy", "the girl", "the driver", "the officer",
             "the doctor", "the soldier", "the old man", "the nurse", "the crowd", "the waiter", "the child")
_ACTIONS = ("opens", "closes", "grabs", "drops", "looks at", "walks toward", "runs past", "pushes", "pulls",
            "picks up", "throws", "kicks", "holds", "hides", "carries", "climbs", "watches", "touches", "cleans",
            "fixes", "reads", "lights", "loads", "unlocks", "shakes", "drags", "lifts", "folds", "fills", "breaks")
_OBJECTS = ("door", "car", "phone", "letter", "gun", "window", "box", "bag", "glass", "bottle", "knife", "book",
            "photo", "key", "lamp", "chair", "table", "coat", "hat", "ladder", "rope", "candle", "map", "wallet",
            "suitcase", "umbrella", "camera", "radio", "guitar", "flower", "bicycle", "envelope", "mirror",
            "blanket", "basket", "ticket", "ring", "helmet", "bucket", "torch")
_PLACES = ("", " in the kitchen", " on the porch", " in the rain", " at the station", " in the office",
           " on the street", " in the garden", " by the river", " in the hallway", " at the bar", " in the car",
           " on the roof", " in the shop", " at night")


def make_mad_standin(root, dim=DIM, seed=0, movies_per_split=None, queries_per_movie=None, minutes=MINUTES):
    """Write the MAD stand-in under ``root`` (``movies_per_split`` / ``queries_per_movie``:
    {split: count}, by default MAD_MOVIES and QUERIES_PER_MOVIE; ``minutes``: the range of a movie's
    length). Returns the summary written to mad_standin.json."""
    movies = _counts("movies", MAD_MOVIES, movies_per_split)
    per_movie = _counts("queries per movie", QUERIES_PER_MOVIE, queries_per_movie)
    low, high = (float(m) for m in minutes)
    if not 1 <= low <= high < float("inf"):
        raise TanError(f"MAD stand-in: minutes {minutes!r}; expected 1 <= shortest <= longest (a movie holds "
                       f"moments of up to 30 s)")
    rng = np.random.default_rng(seed)
    entries = builtin_entries()
    videos, sentences, total = {}, {}, 0
    for split in RELEASE_MOVIES:
        records = {}
        for m in range(movies[split]):
            movie = f"{split}-movie-{m:04d}"
            duration = round(float(rng.uniform(low, high)) * 60.0, 2)
            videos[movie] = {"duration": duration, "moments": []}
            for _ in range(per_movie[split]):
                qid = str(total)
                records[qid] = _query(rng, movie, duration, videos[movie]["moments"])
                sentences[qid] = records[qid]["sentence"]
                total += 1
        atomic_write_text(os.path.join(root, entries[f"mad_{split}"]["annotations"]), json.dumps(records))
    counter, signal_words = _signal_words(sentences.values())
    patterns = {w: _pattern(w, dim) for w in signal_words}
    _write_features(os.path.join(root, entries["mad_train"]["features"]), videos, None, dim, ROWS_PER_SECOND,
                    np.random.default_rng([seed, 1]), patterns)
    _write_token_features(os.path.join(root, entries["mad_train"]["text_features"]), sentences, dim)
    lines = [w + " " + " ".join(f"{x:.4f}" for x in _word_vector(w)) for w in sorted(counter)]
    atomic_write_text(os.path.join(root, WORD_VECTORS), "\n".join(lines) + "\n")
    summary = {"benchmark": "mad", "movies": movies, "queries_per_movie": per_movie, "queries": total,
               "minutes": [low, high], "dim": dim, "rows_per_second": ROWS_PER_SECOND,
               "signal_words": len(signal_words), "seed": seed}
    atomic_write_text(os.path.join(root, "mad_standin.json"), json.dumps(summary, indent=2))
    get_logger("standin").info("MAD stand-in: %d movies, %d queries, in %s", len(videos), total, root)
    return summary


def _write_token_features(path, sentences, dim):
    """{query id: sentence} -> one HDF5 file, a dataset [words, dim] float32 per query id."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with replaced_when_done(path) as tmp, h5py.File(tmp, "w") as h5:
        for qid, sentence in sentences.items():
            words = tokenize(sentence) or ["."]
            h5.create_dataset(qid, data=np.stack([_pattern(w, dim, salt="token") for w in words]).astype(np.float32))


def _counts(what, defaults, given):
    counts = dict(defaults, **(given or {}))
    for split, count in counts.items():
        if split not in defaults or isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise TanError(f"MAD stand-in: {what} {split!r} {count!r}; expected a positive number for each of "
                           f"{', '.join(defaults)}")
    return counts


def _query(rng, movie, duration, moments):
    """One query of ``movie`` in the release's layout; its moment is added to ``moments``."""
    subject = _SUBJECTS[int(rng.integers(len(_SUBJECTS)))]
    sentence = (f"{subject} {_ACTIONS[int(rng.integers(len(_ACTIONS)))]} the "
                f"{_OBJECTS[int(rng.integers(len(_OBJECTS)))]}{_PLACES[int(rng.integers(len(_PLACES)))]}.")
    sentence = sentence[0].upper() + sentence[1:]
    length = float(np.clip(rng.lognormal(np.log(3.5), 0.6), 0.5, 30.0))
    start = round(float(rng.uniform(0, duration - length)), 3)
    end = round(start + length, 3)
    widen = rng.uniform(0, 0.5, size=2)
    ext = [round(max(start - widen[0], 0.0), 3), round(min(end + widen[1], duration), 3)]
    if rng.random() < NO_LENGTH:
        ext = [ext[0], ext[0]]
    else:
        moments.append(Query(movie, duration, ext[0], ext[1], sentence))
    return {"movie": movie, "sentence": sentence, "timestamps": [start, end], "ext_timestamps": ext,
            "movie_duration": duration}
