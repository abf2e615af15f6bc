"""Clip features from one on-disk form to another (docs/data.md §10.2):
an HDF5 file in either layout of feature_sources.py (a dataset per video, or
a group per video holding a named dataset) and a folder of per-video
``.npy`` / ``.npz`` files, in any direction (HDF5 to HDF5 re-lays a file out;
folder to folder changes the file format or the dtype).

Arrays are copied in the dtype they are stored in unless a ``dtype`` is
asked for, so a round trip gives back the same bits. The destination
appears complete or not at all: an HDF5 file is written under a temporary
name beside it and renamed when complete, a folder is written as a
temporary folder beside it and renamed into place; an existing destination
is replaced only when asked, and stays as it was if the conversion fails or
is interrupted.

    from tan_apps.converters.features import convert_features
    summary = convert_features("features.hdf5", "features/", file_format="npz")
    print(summary.text())
"""
import os
import time
from dataclasses import dataclass

import h5py
import numpy as np

from tan.errors import TanError
from tan.utils.io import folder_replaced_when_done, read_named_text, clear_abandoned_temporaries_of, replaced_when_done
from tan.utils.progress import progress
from tan.data.features.array_files import write_npz
from tan.data.features.sources import HDF5_GROUP_KEY, NPZ_KEY, FolderFeatures, HDF5Features

TARGETS = ("hdf5", "folder")
LAYOUTS = ("flat", "grouped")
FILE_FORMATS = ("npz", "npy")
DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "keep": None}
HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf")
LISTED_AT_MOST = 5  # ids named in an error about many videos


# ---------------------------------------------------------------- the source

def describe(path, layout=None, formats=(), key=None):
    """An HDF5 file (``layout`` given) or a folder of files of ``formats``, in words."""
    if layout is not None:
        inside = f", dataset {key!r} in each video's group" if layout == "grouped" else ""
        return f"HDF5 file {path!r} ({layout} layout{inside})"
    kinds = "/".join(f".{f}" for f in sorted(formats)) or "no .npy/.npz"
    inside = f", array {key!r} of each .npz" if "npz" in formats else ""
    return f"folder {path!r} ({kinds} files{inside})"


@dataclass(frozen=True)
class Source:
    """What is converted: feature_sources' reader of it (``read_stored`` gives the
    arrays in their stored dtype, so that a copy is bit for bit) and its form."""

    reader: object  # HDF5Features or FolderFeatures
    layout: str = None  # HDF5: "flat" or "grouped"
    formats: frozenset = frozenset()  # folder: of "npy", "npz"

    @property
    def key(self):
        return self.reader.key

    def describe(self):
        return describe(self.reader.path, self.layout, self.formats, self.key)


def open_stored(path, key=None):
    """The Source at ``path``: a folder of per-video files, or an HDF5 file (one
    with any group per video is read, and re-written by default, as grouped)."""
    if os.path.isdir(path):
        reader = FolderFeatures(path, key, key_field="--key")
        return Source(reader, formats=reader.formats())
    if not os.path.exists(path):
        raise TanError(f"source {path!r} not found; expected an HDF5 file or a folder of per-video .npy/.npz files")
    if not os.path.isfile(path) or not h5py.is_hdf5(path):
        raise TanError(f"source {path!r} is neither an HDF5 file nor a folder; expected an HDF5 file or a folder "
                       f"of per-video .npy/.npz files")
    reader = HDF5Features(path, key, key_field="--key")
    return Source(reader, layout="grouped" if reader.grouped() else "flat")


# ---------------------------------------------------------------- what is asked for

@dataclass(frozen=True)
class Output:
    """Where and how the converted arrays go."""

    path: str
    target: str  # "hdf5" or "folder"
    layout: str = None  # HDF5: "flat" or "grouped"
    file_format: str = None  # folder: "npy" or "npz"
    key: str = None  # the array's name: in each group (grouped HDF5) or in each .npz
    dtype: np.dtype = None  # None: as stored

    def describe(self):
        return describe(self.path, self.layout, {self.file_format} - {None}, self.key)


def _one_of(value, allowed, what):
    if value is not None and value not in allowed:
        raise TanError(f"{what} {value!r} unknown; expected one of {', '.join(allowed)}")
    return value


def dtype_of(name):
    """The numpy dtype of a --dtype name (None for "keep")."""
    _one_of(name, tuple(DTYPES), "dtype (--dtype)")
    return DTYPES[name or "keep"]


def target_of(dst, to=None):
    """"hdf5" or "folder": ``to`` when given, else from DST's name (.h5, .hdf5, .hdf: an HDF5 file)."""
    if _one_of(to, TARGETS, "output kind (--to)") is not None:
        return to
    return "hdf5" if dst.lower().endswith(HDF5_SUFFIXES) else "folder"


def plan_output(source, dst, target, layout=None, file_format=None, out_key=None, dtype="keep"):
    """The Output for ``source``: what is not given follows the source where it
    can (an HDF5 file keeps its layout and group key, a folder its file
    format and .npz key), else the usual defaults (flat HDF5, .npy files,
    keys c3d_features and features). Options that do not apply to the
    output are errors, not silently ignored."""
    cast = dtype_of(dtype)
    _one_of(layout, LAYOUTS, "HDF5 layout (--layout)")
    _one_of(file_format, FILE_FORMATS, "file format (--format)")
    if target == "hdf5":
        if file_format is not None:
            raise TanError(f"--format {file_format} is for folder output; {dst!r} is written as an HDF5 file "
                           f"(--to folder writes a folder)")
        layout = layout or source.layout or "flat"
        keyed = layout == "grouped"
        default_key = source.key if source.layout == "grouped" else HDF5_GROUP_KEY
    else:
        if layout is not None:
            raise TanError(f"--layout {layout} is for HDF5 output; {dst!r} is written as a folder "
                           f"(--to hdf5 writes an HDF5 file)")
        file_format = file_format or (next(iter(source.formats)) if len(source.formats) == 1 else "npy")
        keyed = file_format == "npz"
        default_key = source.key if "npz" in source.formats else NPZ_KEY
    if out_key is not None and not keyed:
        raise TanError(f"--out-key names the array inside a grouped HDF5 file's groups or inside .npz files; "
                       f"{'a flat HDF5 file' if target == 'hdf5' else '.npy files'} have none")
    return Output(dst, target, layout if target == "hdf5" else None, file_format,
                  (out_key or default_key) if keyed else None, cast)


def check_destination(src, dst, target, overwrite):
    """An existing DST is replaced only with ``overwrite``, only by its own kind, and never when SRC is inside it."""
    if not os.path.lexists(dst):
        return
    if not overwrite:
        raise TanError(f"destination {dst!r} exists; pass --overwrite to replace it (it is left as it is until "
                       f"the new one is complete)")
    if target == "hdf5" and os.path.isdir(dst):
        raise TanError(f"destination {dst!r} is a folder; an HDF5 file does not replace a folder (remove it, or "
                       f"write a folder with --to folder)")
    if target == "folder" and not os.path.isdir(dst):
        raise TanError(f"destination {dst!r} is a file; a folder does not replace a file (remove it, or write an "
                       f"HDF5 file with --to hdf5)")
    src, dst = os.path.realpath(src), os.path.realpath(dst)
    if src != dst and os.path.commonpath([src, dst]) == dst:
        raise TanError(f"source {src!r} is inside destination {dst!r}: replacing the destination would delete it")


def chosen_videos(source, videos=None):
    """The videos to convert: all of the source's (sorted), or ``videos`` in their order, each once."""
    present = sorted(source.reader.videos())
    if not present:
        raise TanError(f"source {source.describe()} holds no videos")
    if videos is None:
        return present
    wanted = list(dict.fromkeys(videos))
    if not wanted:
        raise TanError("the video list (--videos) is empty")
    held = set(present)
    missing = [v for v in wanted if v not in held]
    if missing:
        more = f" and {len(missing) - LISTED_AT_MOST} more" if len(missing) > LISTED_AT_MOST else ""
        raise TanError(f"{len(missing)} of the {len(wanted)} videos asked for are not in {source.describe()}: "
                       f"{', '.join(map(repr, missing[:LISTED_AT_MOST]))}{more}")
    return wanted


def read_video_list(path):
    """Video ids of a UTF-8 text file, one a line (blank lines skipped)."""
    text = read_named_text(path, f"video list {path!r} (--videos)")
    return [line.strip() for line in text.splitlines() if line.strip()]


def checked_shapes(source, videos):
    """{video: (T, D)} from headers, before anything is written: a missing key or
    an array that is not [T, D] stops the conversion while nothing is on disk."""
    shapes = source.reader.shapes(videos)
    for video, shape in shapes.items():
        if len(shape) != 2:
            raise TanError(f"video {video!r} of {source.describe()} holds an array of shape {shape}; expected "
                           f"[T, D] clip features")
    return shapes


def check_file_names(videos):
    """Video ids become file names in folder output: one holding a path separator cannot."""
    separators = {os.sep, os.altsep} - {None}
    bad = [v for v in videos if v in (".", "..") or any(s in v for s in separators)]
    if bad:
        raise TanError(f"video ids {bad[:LISTED_AT_MOST]} cannot be file names; write an HDF5 file instead")


# ---------------------------------------------------------------- writing

def cast_values(array, dtype, video):
    """``array`` in ``dtype`` (None: as it is); values too large for it are an error,
    not infinities that the dataset would later drop the video for."""
    if dtype is None or array.dtype == dtype:
        return array
    with np.errstate(over="ignore"):  # an overflow is reported below, naming the video
        cast = array.astype(dtype)
    overflowed = ~np.isfinite(cast) & np.isfinite(array)
    if overflowed.any():
        largest = float(np.abs(array[overflowed]).max())
        raise TanError(f"video {video!r} holds values up to {largest:g}, beyond {dtype.name}'s range "
                       f"(±{float(np.finfo(dtype).max):g}); keep a wider dtype (--dtype float32 or keep)")
    return cast


def _write_file(path, write):
    with open(path, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())  # on disk before the folder is renamed into place


def write_folder(folder, output, arrays):
    """One file per (video, array) of ``arrays`` in ``folder``."""
    for video, array in arrays:
        path = os.path.join(folder, f"{video}.{output.file_format}")
        if output.file_format == "npy":
            _write_file(path, lambda f: np.save(f, array, allow_pickle=False))
        else:
            _write_file(path, lambda f: write_npz(f, {output.key: array}))


def write_hdf5(path, output, arrays):
    """An HDF5 file of ``arrays`` in ``output``'s layout (contiguous, uncompressed)."""
    with h5py.File(path, "w") as f:
        for video, array in arrays:
            if output.layout == "grouped":
                f.create_group(video).create_dataset(output.key, data=array)
            else:
                f.create_dataset(video, data=array)
    with open(path, "rb") as f:
        os.fsync(f.fileno())  # on disk before it is renamed into place


def _bytes_in(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    with os.scandir(path) as entries:
        return sum(entry.stat().st_size for entry in entries if entry.is_file())


# ---------------------------------------------------------------- the whole conversion

@dataclass
class ConversionSummary:
    source: str
    destination: str
    videos: int
    dims: tuple  # the feature widths found, sorted
    lengths: tuple  # rows per video: min, median, max
    dtypes: tuple  # as written, sorted
    bytes_written: int
    seconds: float
    removed: tuple = ()  # what killed conversions had left beside DST, cleared first (one line each)

    def text(self):
        shortest, median, longest = self.lengths
        removed = [f"cleared what a killed conversion had left: {'; '.join(self.removed)}"] if self.removed else []
        return "\n".join(removed + [
            f"converted {self.videos} videos",
            f"  from {self.source}",
            f"  to   {self.destination}",
            f"  dims {' / '.join(map(str, self.dims))}; dtype {' / '.join(self.dtypes)}",
            f"  length (rows per video) min {shortest}, median {median:g}, max {longest}",
            f"  wrote {self.bytes_written} bytes ({self.bytes_written / 2 ** 20:.1f} MiB) in {self.seconds:.1f} s",
        ])


def convert_features(src, dst, to=None, layout=None, key=None, out_key=None, file_format=None, dtype="keep",
                     videos=None, overwrite=False):
    """Convert the features at ``src`` (an HDF5 file or a folder of per-video
    files) into ``dst``; returns a ConversionSummary.

    ``to``: "hdf5" or "folder" (default: from DST's name, .h5/.hdf5/.hdf for
    HDF5); ``layout``: "flat" or "grouped" HDF5 output; ``key``: the array's
    name in SRC's groups or .npz files; ``out_key``: in DST's; ``file_format``:
    "npy" or "npz" for folder output; ``dtype``: "keep" (bit for bit),
    "float32" or "float16"; ``videos``: ids to convert (default all);
    ``overwrite``: replace an existing DST."""
    started = time.monotonic()
    target = target_of(dst, to)
    dtype_of(dtype)  # a bad dtype is reported before the source is read
    # A conversion killed outright (SIGKILL, a crash) could not clear its temporary copy, nor put back a
    # DST it had moved aside for the new one: this one does, before DST is looked at.
    removed = tuple(clear_abandoned_temporaries_of(dst))
    check_destination(src, dst, target, overwrite)
    source = open_stored(src, key)
    try:
        output = plan_output(source, dst, target, layout, file_format, out_key, dtype)
        selected = chosen_videos(source, videos)
        if target == "folder":
            check_file_names(selected)
        shapes = checked_shapes(source, selected)
        dtypes = set()

        def converted():
            for video in progress(selected, total=len(selected), desc="converting", unit="video"):
                array = cast_values(source.reader.read_stored(video), output.dtype, video)
                dtypes.add(array.dtype.name)
                yield video, array

        written_atomically = folder_replaced_when_done if target == "folder" else replaced_when_done
        write = write_folder if target == "folder" else write_hdf5
        with written_atomically(dst) as tmp:
            write(tmp, output, converted())
    finally:
        source.reader.close()
    lengths = [shape[0] for shape in shapes.values()]
    return ConversionSummary(
        source=source.describe(), destination=output.describe(), videos=len(selected),
        dims=tuple(sorted({shape[1] for shape in shapes.values()})),
        lengths=(min(lengths), float(np.median(lengths)), max(lengths)), dtypes=tuple(sorted(dtypes)),
        bytes_written=_bytes_in(dst), seconds=time.monotonic() - started, removed=removed)
