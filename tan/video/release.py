"""A release's streams for many videos, from one decode of each: a folder per
stream (``clip/``, ``slowfast/``) of ``{video}.npz`` files holding
``features`` [T, D] as the release stores them (float16), each folder with
its ``extractor.json``. A video's files are written atomically once the
whole video is through, every stream's, each recording the video file's
size and modification time beside the rows; run again, the videos that have
their files are skipped, unless their video file has changed since. A video
that cannot be read is reported at the end with its reason; the others go on."""
import os

import numpy as np

from ..errors import TanError
from ..utils.io import atomic_write_bytes
from ..utils.logger import get_logger
from ..utils.progress import progress
from ..version import __version__
from ..data.features.provenance import (RECORD_VERSION, describe_extractor, differences, read_extractor,
                                        same_extractor, write_extractor)
from .decode import VideoError, decoder_version
from .extract import FEATURE_KEY, ExtractionSummary, check_folder, claim_folder, npz_bytes, source_stamp, videos_to_do
from .queries import text_record
from .release_sampling import release_chunks

STORAGE = {"float16": np.float16, "float32": np.float32}


def release_record(backbone, sampling, storage):
    return {"version": RECORD_VERSION, "kind": "video", **backbone.record(), **sampling.fields(),
            "storage": storage, "decoder": decoder_version(), "tan_version": __version__}


def stored(rows, storage):
    """Rows as a file of the release holds them, read back as float32 (what a model trained on it saw)."""
    return rows.astype(STORAGE[storage]).astype(np.float32)


def encode_streams(path, backbones, samplings, clips_per_chunk=16, desc=None):
    """([T_i, D_i] float32 rows of each stream, the video's length) from one decode of ``path``; with
    ``desc``, a progress bar of the batches (an hour-long video takes a while)."""
    rows = [[] for _ in backbones]
    duration = None
    chunks = release_chunks(path, samplings, clips_per_chunk)
    for i, chunk in (progress(chunks, desc=desc, unit="batch") if desc else chunks):
        if len(chunk.frames):
            rows[i].append(backbones[i].encode(chunk.frames))
        duration = chunk.end if chunk.end is not None else duration
    arrays = [np.concatenate(r).astype(np.float32) if r else np.zeros((0, b.dim), np.float32)
              for r, b in zip(rows, backbones)]
    return arrays, duration


def extract_release(videos, streams, output, clips_per_chunk=16, storage="float16", overwrite=False):
    """Every stream of ``streams`` ([(folder name, backbone, ReleaseSampling)]) of ``videos`` ([(id, path)])
    into ``output/{folder}/``; an :class:`ExtractionSummary`."""
    if storage not in STORAGE:
        raise TanError(f"storage {storage!r}: expected one of {', '.join(STORAGE)}")
    claims = [(os.path.join(output, name), release_record(backbone, sampling, storage), f"{name} features")
              for name, backbone, sampling in streams]
    for folder, record, what in claims:  # every folder checked before any is written
        check_folder(folder, record, what, overwrite)
    for folder, record, what in claims:
        claim_folder(folder, record, what, overwrite)
        get_logger("extract").info("%s: %s", what, describe_extractor(record))
    folders = [folder for folder, _, _ in claims]
    summary = ExtractionSummary(output)
    todo = videos_to_do(videos, lambda video: [os.path.join(f, f"{video}.npz") for f in folders], summary, overwrite)
    backbones, samplings = [s[1] for s in streams], [s[2] for s in streams]
    for video, path in progress(todo, total=len(todo), desc="videos", unit="video"):
        stamp = source_stamp(path)
        try:
            arrays, _ = encode_streams(path, backbones, samplings, clips_per_chunk, desc=video)
        except VideoError as e:
            summary.fail(video, path, e.reason, e.detail)
            continue
        except TanError:
            raise  # a mistake in the command or the setup (an old PyAV), not in this video
        except Exception as e:  # noqa: BLE001  (one video's failure must not stop the others)
            summary.fail(video, path, "decoding error", f"{type(e).__name__}: {e}")
            continue
        for folder, rows in zip(folders, arrays):
            atomic_write_bytes(os.path.join(folder, f"{video}.npz"),
                               npz_bytes({FEATURE_KEY: rows.astype(STORAGE[storage]), **stamp}))
        summary.written.append(video)
        summary.clips += len(arrays[0])
    return summary


def label_release(output, streams, text_backbone, text_folder, storage="float16"):
    """Write the extractor records of a downloaded release's folders (``output/{folder}``), whose files
    HERO's extractor made, so that training on them records how to make a new video's features: each
    folder must hold .npz files of the stream's width, and no record of another extractor."""
    plans = [(os.path.join(output, name), release_record(backbone, sampling, storage), backbone.dim, FEATURE_KEY)
             for name, backbone, sampling in streams]
    plans.append((os.path.join(output, text_folder), text_record(text_backbone, storage),
                  text_backbone.dim, "last_hidden_state"))
    for folder, record, width, key in plans:
        check_release_folder(folder, record, width, key)
    for folder, record, _, _ in plans:
        if read_extractor(folder) != record:
            write_extractor(folder, record)
    return [folder for folder, _, _, _ in plans]


def check_release_folder(folder, record, width, key):
    existing = read_extractor(folder)
    if existing is not None and not same_extractor(existing, record):
        raise TanError(f"{folder!r} holds features made by another extractor ({describe_extractor(existing)}); "
                       f"it differs in {'; '.join(differences(existing, record))}")
    files = sorted(n for n in os.listdir(folder) if n.endswith(".npz")) if os.path.isdir(folder) else []
    if not files:
        raise TanError(f"{folder!r}: expected a folder of the release's .npz files")
    with np.load(os.path.join(folder, files[0])) as sample:
        shape = sample[key].shape if key in sample.files else None
    if shape is None or len(shape) != 2 or shape[1] != width:
        raise TanError(f"{os.path.join(folder, files[0])!r}: expected {key!r} of {width} columns (made by "
                       f"{describe_extractor(record)}), found {shape if shape else 'no such array'}")
