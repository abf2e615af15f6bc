"""Word vectors of a whole GloVe text file, indexed once so that any word
costs a lookup instead of a pass over gigabytes of text.

The index of a file lives in the word-vector cache folder, in a folder named
``{stem}.{hash}.index`` whose 16-hex-digit hash covers the source file's
absolute path, size and modification time, the vector size and this format's
version: editing or replacing the file, or changing the size, leads to a new
index. It holds

- ``vectors.npy``: float32 ``[N, D]``, one row per entry of the file in file
  order (a duplicated token's later rows included, though never looked up),
  opened memory-mapped;
- ``words.bin``: every distinct token once, as UTF-8, sorted by its bytes and
  concatenated;
- ``offsets.npy``: int64 ``[V + 1]``, where the i-th sorted token starts and
  ends in ``words.bin``;
- ``rows.npy``: int64 ``[V]``, the row of the i-th sorted token (its first
  entry in the file: the first entry of a token wins, as in
  :func:`~tan.data.text.glove.read_word_vectors`);
- ``manifest.json``: format, D, the source's path, size and modification
  time, the counts and each file's size.

A lookup is a binary search over the memory-mapped offsets (O(log V) reads of
a few bytes), so a process never holds the token list in memory. The folder is
written under a temporary name and renamed into place complete; on open, a
manifest that does not match the source or files of the wrong size (a
truncated or damaged index) are reported and the index is built again.
"""
import errno
import hashlib
import io
import json
import mmap
import os
import shutil
import struct
import tempfile
import time

import numpy as np

from ...utils import comm
from ...utils.io import clear_abandoned_temporaries_of, sync_folder
from ...utils.logger import get_logger
from .glove import check_word_vector_file, glove_entries, parse_vector

FORMAT = 1
MANIFEST = "manifest.json"
VECTORS = "vectors.npy"
WORDS = "words.bin"
OFFSETS = "offsets.npy"
ROWS = "rows.npy"
# vectors.npy gets a fixed-size header, written once the row count is known;
# 128 bytes hold any shape of two 20-digit numbers.
_HEADER_BYTES = 128


class _Invalid(Exception):
    """An index folder that is incomplete, damaged or not of this source."""


def index_folder(path, dim, cache_dir):
    """Where the index of the GloVe file ``path`` (vectors of size ``dim``) lives in ``cache_dir``."""
    stat = os.stat(path)
    key = f"index|{FORMAT}|{os.path.abspath(path)}|{stat.st_size}|{stat.st_mtime_ns}|{dim}"
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.join(cache_dir, f"{stem}.{hashlib.sha1(key.encode()).hexdigest()[:16]}.index")


def _source(path):
    stat = os.stat(path)
    return {"path": os.path.abspath(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


class WordVectorIndex:
    """Vectors of every token of a GloVe text file: ``index.lookup(words)``,
    ``word in index``, ``len(index)`` (distinct tokens).

    ``WordVectorIndex.open(path, dim, cache_dir)`` builds the index on first
    use (one pass over the file) and opens it afterwards."""

    def __init__(self, vectors, blob, offsets, rows, folder=None):
        self.vectors = vectors  # [N, D] float32, file order
        self._blob = blob  # sorted tokens, UTF-8, concatenated (mmap or bytes)
        self._offsets = offsets  # int64 [V + 1]
        self._rows = rows  # int64 [V]
        self.folder = folder  # None for an index held in memory
        self.dim = vectors.shape[1]

    @classmethod
    def open(cls, path, dim, cache_dir):
        """The index of ``path`` in ``cache_dir``, built there first if it is
        missing, out of date or damaged. In a distributed run every process
        calls it: the main process builds, the others wait and then open."""
        if comm.is_main_process():
            index = cls._open_or_build(path, dim, cache_dir)
        comm.synchronize()
        if not comm.is_main_process():
            index = cls._open_or_build(path, dim, cache_dir)
        return index

    @classmethod
    def existing(cls, path, dim, cache_dir):
        """The index of ``path`` if a complete one is in ``cache_dir``, else None; never builds."""
        if not os.path.isfile(path):
            return None
        folder = index_folder(path, dim, cache_dir)
        if not os.path.isdir(folder):
            return None
        try:
            return cls._load(folder, _source(path), dim)
        except _Invalid as e:
            get_logger("data").warning("word-vector index %s is incomplete or damaged (%s); not used", folder, e)
            return None

    def __len__(self):
        return len(self._rows)

    def __contains__(self, word):
        return self._position(word) >= 0

    def lookup(self, words):
        """{word: float32[D]} for those of ``words`` in the index (each vector a copy of its own)."""
        positions = {w: self._position(w) for w in dict.fromkeys(words)}
        found = {w: int(self._rows[p]) for w, p in positions.items() if p >= 0}
        if not found:
            return {}
        rows = sorted(set(found.values()))  # one read of each row, in file order
        block = np.array(self.vectors[rows], dtype=np.float32)
        where = {row: i for i, row in enumerate(rows)}
        return {w: block[where[row]].copy() for w, row in found.items()}

    def _position(self, word):
        """The rank of ``word`` among the sorted tokens, or -1."""
        try:
            key = word.encode("utf-8")
        except (AttributeError, UnicodeEncodeError):  # not a str, or lone surrogates: never in a file
            return -1
        offsets, blob = self._offsets, self._blob
        lo, hi = 0, len(self._rows)
        while lo < hi:
            mid = (lo + hi) // 2
            if blob[int(offsets[mid]):int(offsets[mid + 1])] < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self._rows) and blob[int(offsets[lo]):int(offsets[lo + 1])] == key:
            return lo
        return -1

    # -- opening -----------------------------------------------------------

    @classmethod
    def _open_or_build(cls, path, dim, cache_dir):
        check_word_vector_file(path)
        folder = index_folder(path, dim, cache_dir)
        logger = get_logger("data")
        damaged = False
        if os.path.lexists(folder):
            try:
                index = cls._load(folder, _source(path), dim)
                logger.info("word vectors: index of %s opened (%d words): %s", path, len(index), folder)
                return index
            except _Invalid as e:
                logger.warning("word-vector index %s is incomplete or damaged (%s); building it again", folder, e)
                damaged = True
        return cls._build(path, dim, cache_dir, folder, damaged)

    @classmethod
    def _load(cls, folder, source, dim):
        """Open a published (or just written) index folder; _Invalid when it
        does not match ``source`` and ``dim`` or a file has the wrong size."""
        try:
            with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
                manifest = json.load(f)
        except FileNotFoundError:
            raise _Invalid(f"no {MANIFEST}") from None
        except (OSError, ValueError) as e:
            raise _Invalid(f"{MANIFEST} unreadable: {e}") from None
        if not isinstance(manifest, dict):
            raise _Invalid(f"{MANIFEST} is not an object")
        for key, expected in (("format", FORMAT), ("dim", dim), ("source", source)):
            if manifest.get(key) != expected:
                raise _Invalid(f"{MANIFEST}: {key} is {manifest.get(key)!r}, expected {expected!r}")
        try:
            count, rows, blob_bytes = (int(manifest[k]) for k in ("words", "rows", "blob_bytes"))
            sizes = {name: int(manifest["files"][name]) for name in (VECTORS, WORDS, OFFSETS, ROWS)}
        except (KeyError, TypeError, ValueError):
            raise _Invalid(f"{MANIFEST} lacks the counts or file sizes") from None
        if sizes[VECTORS] != _HEADER_BYTES + rows * dim * 4 or sizes[WORDS] != blob_bytes:
            raise _Invalid(f"{MANIFEST}: file sizes do not match the counts")
        for name, size in sizes.items():
            try:
                actual = os.path.getsize(os.path.join(folder, name))
            except OSError as e:
                raise _Invalid(f"{name}: {e.strerror}") from None
            if actual != size:
                raise _Invalid(f"{name} has {actual} bytes, expected {size}")
        vectors = _load_array(folder, VECTORS, np.float32, (rows, dim))
        offsets = _load_array(folder, OFFSETS, np.int64, (count + 1,))
        row_of = _load_array(folder, ROWS, np.int64, (count,))
        if offsets[0] != 0 or offsets[-1] != blob_bytes:
            raise _Invalid(f"{OFFSETS} does not span {WORDS}")
        if blob_bytes:
            with open(os.path.join(folder, WORDS), "rb") as f:
                blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        else:
            blob = b""
        return cls(vectors, blob, offsets, row_of, folder)

    # -- building ----------------------------------------------------------

    @classmethod
    def _build(cls, path, dim, cache_dir, folder, damaged):
        logger = get_logger("data")
        name = os.path.basename(folder)
        try:
            os.makedirs(cache_dir, exist_ok=True)
            clear_abandoned_temporaries_of(folder)  # of builds killed before they finished
            tmp = tempfile.mkdtemp(prefix=f".{name}.{os.getpid()}.", suffix=".tmp", dir=cache_dir)
            os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the usual permissions
        except OSError as e:
            logger.warning("cannot write the word-vector index in %s (%s); indexing %s in memory, for this "
                           "process only", cache_dir, e.strerror or e, path)
            return cls._build_in_memory(path, dim)
        logger.info("word vectors: indexing all of %s, once; later lookups of any word read the index %s "
                    "instead of the text file", path, folder)
        start = time.perf_counter()
        source = _source(path)
        try:
            _write_index(path, dim, tmp, source)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            logger.warning("cannot write the word-vector index in %s (%s); indexing %s in memory, for this "
                           "process only", cache_dir, e.strerror or e, path)
            return cls._build_in_memory(path, dim)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if _source(path) != source:
            logger.warning("%s changed while it was being indexed; this process uses the index of what it "
                           "read, and the next one indexes the file again", path)
            return cls._private(tmp, source, dim)
        if damaged:
            _set_aside(folder, cache_dir, name)
        try:
            os.rename(tmp, folder)
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                logger.warning("cannot publish the word-vector index %s (%s); it is used by this process only",
                               folder, e.strerror or e)
                return cls._private(tmp, source, dim)
            try:  # another process published the same index meanwhile: use theirs
                index = cls._load(folder, source, dim)
                shutil.rmtree(tmp, ignore_errors=True)
                return index
            except _Invalid:
                return cls._private(tmp, source, dim)
        sync_folder(cache_dir)
        _remove_earlier_versions(cache_dir, name, source, dim)
        index = cls._load(folder, source, dim)
        logger.info("word vectors: %s indexed in %.1f s (%d words, %d rows x %d, %.2f GB): %s", path,
                    time.perf_counter() - start, len(index), index.vectors.shape[0], dim,
                    index.vectors.nbytes / 1e9, folder)
        return index

    @classmethod
    def _private(cls, tmp, source, dim):
        """Open an unpublished index and remove its folder (the open files stay readable)."""
        try:
            return cls._load(tmp, source, dim)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def _build_in_memory(cls, path, dim):
        out = io.BytesIO()
        words = _write_vectors(path, dim, out)
        blob, offsets, rows = _sort_words(words)
        vectors = np.frombuffer(out.getbuffer(), dtype="<f4", offset=_HEADER_BYTES).reshape(len(words), dim)
        vectors.flags.writeable = False
        return cls(vectors, blob, offsets, rows)


def _load_array(folder, name, dtype, shape):
    file = os.path.join(folder, name)
    try:
        array = np.load(file, mmap_mode="r" if np.prod(shape) else None, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise _Invalid(f"{name}: {e}") from None
    if array.dtype != dtype or array.shape != shape:
        raise _Invalid(f"{name} holds {array.dtype} {array.shape}, expected {np.dtype(dtype)} {shape}")
    return array


def _npy_header(rows, dim):
    """A version 1.0 .npy header of exactly _HEADER_BYTES bytes for little-endian float32 [rows, dim]."""
    text = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, dim)
    text = text.ljust(_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")


def _write_vectors(path, dim, out):
    """One pass over the GloVe file: every entry's vector to ``out`` as a .npy
    file (rows in file order); returns the entries' tokens as UTF-8, in order."""
    out.write(bytes(_HEADER_BYTES))
    words = []
    for line_no, word, numbers in glove_entries(path, dim, desc=f"indexing {os.path.basename(path)}"):
        out.write(parse_vector(path, line_no, numbers).astype("<f4", copy=False).tobytes())
        words.append(word.encode("utf-8"))
    out.seek(0)
    out.write(_npy_header(len(words), dim))
    out.seek(0, io.SEEK_END)
    return words


def _sort_words(words):
    """(blob, offsets, rows): the distinct tokens sorted by their bytes and
    concatenated, where each starts and ends, and the row of its first entry."""
    order = sorted(range(len(words)), key=words.__getitem__)  # stable: equal tokens keep file order
    kept, previous = [], None
    for row in order:
        if words[row] != previous:
            kept.append(row)
            previous = words[row]
    lengths = np.fromiter((len(words[row]) for row in kept), dtype=np.int64, count=len(kept))
    offsets = np.zeros(len(kept) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return b"".join(words[row] for row in kept), offsets, np.asarray(kept, dtype=np.int64)


def _write_index(path, dim, folder, source):
    """Every file of the index of ``path`` into ``folder``, the manifest last, each synced."""
    with open(os.path.join(folder, VECTORS), "wb") as out:
        words = _write_vectors(path, dim, out)
        out.flush()
        os.fsync(out.fileno())
    blob, offsets, rows = _sort_words(words)
    _write_synced(os.path.join(folder, WORDS), lambda f: f.write(blob))
    _write_synced(os.path.join(folder, OFFSETS), lambda f: np.save(f, offsets))
    _write_synced(os.path.join(folder, ROWS), lambda f: np.save(f, rows))
    manifest = {"format": FORMAT, "dim": dim, "source": source, "words": len(rows), "rows": len(words),
                "blob_bytes": len(blob),
                "files": {name: os.path.getsize(os.path.join(folder, name)) for name in (VECTORS, WORDS, OFFSETS,
                                                                                         ROWS)}}
    _write_synced(os.path.join(folder, MANIFEST), lambda f: f.write(json.dumps(manifest, indent=1).encode()))
    sync_folder(folder)


def _write_synced(file, write):
    with open(file, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def _set_aside(folder, cache_dir, name):
    """Move a damaged index out of the way (under a temporary's name, then
    removed); processes that have it open keep reading their files."""
    try:
        aside = tempfile.mkdtemp(prefix=f".{name}.{os.getpid()}.", suffix=".tmp", dir=cache_dir)
        os.rename(folder, aside)  # replaces the empty folder
    except OSError:
        return  # gone already (another process set it aside), or cannot be moved: publishing will tell
    shutil.rmtree(aside, ignore_errors=True)


def _remove_earlier_versions(cache_dir, name, source, dim):
    """Remove the indexes of earlier versions of the same file (same path and
    vector size, another size or time): nothing opens them again."""
    stem = os.path.splitext(os.path.basename(source["path"]))[0]
    for entry in sorted(os.listdir(cache_dir)):
        if entry == name or not (entry.startswith(f"{stem}.") and entry.endswith(".index")):
            continue
        folder = os.path.join(cache_dir, entry)
        try:
            with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
                manifest = json.load(f)
            earlier = (manifest["dim"] == dim and manifest["source"]["path"] == source["path"]
                       and manifest["source"] != source)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if earlier:
            shutil.rmtree(folder, ignore_errors=True)
            get_logger("data").info("word vectors: removed %s, the index of an earlier version of %s", folder,
                                    source["path"])


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
