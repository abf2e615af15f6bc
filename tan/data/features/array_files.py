"""One array per .npy file, or a named array in a .npz file: its shape from
the header alone, and its values as stored or as float32. Errors name the
file, the key and what sets the key: a catalog field ("feature_key") or a
command-line option ("--key")."""
import os
import zipfile

import numpy as np

from ...errors import TanError

_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
# How the two kinds of file begin: NumPy's own header, and a zip archive's (an empty one included).
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def unreadable_reason(path, error, advice=True):
    """Why ``path`` (a .npy or .npz file) could not be read, in words that say what to do
    (``advice``: how to write one; not for a file tan writes itself).

    NumPy's own messages mislead here: a text file named .npy is reported as
    "pickled data" that should be loaded "unsafely", and a truncated .npz
    surfaces as zipfile's "File is not a zip file"."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        return e.strerror or str(e)
    if not head:
        return "the file is empty"
    npz = path.endswith(".npz")
    if npz and not head.startswith(_ZIP_MAGICS):
        return "not a .npz file (it does not start as a zip archive does)" + ("; write it with numpy.savez" * advice)
    if not npz and not head.startswith(_NPY_MAGIC):
        return "not a .npy file (it does not start with NumPy's header)" + ("; write it with numpy.save" * advice)
    if isinstance(error, zipfile.BadZipFile) or "pickle" in str(error):
        return f"the file is truncated or damaged ({error})"
    return f"the file is truncated or damaged ({type(error).__name__}: {error})"


def key_setting(field):
    """What sets a key, for an error: "option --key" or "catalog field 'feature_key'"."""
    return f"option {field}" if field.startswith("-") else f"catalog field {field!r}"


def list_array_files(folder, what):
    """{name without suffix: path} of the .npy and .npz files of ``folder``, from one listing;
    a name present as both is an error (which one is meant is not ours to guess). ``what``
    names the folder in that error ("feature folder", ...)."""
    files = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            name, suffix = os.path.splitext(entry.name)
            if suffix not in (".npy", ".npz") or not entry.is_file():
                continue
            if name in files:
                raise TanError(f"{what} {folder!r} holds both {name}.npy and {name}.npz; keep one")
            files[name] = entry.path
    return files


def _missing_key(path, key, field, names):
    return TanError(f"{path}: no array {key!r} ({key_setting(field)}); it holds {sorted(names)}")


def array_shape(path, key, field):
    """The shape of the array of ``path`` (a .npy, or ``key`` of a .npz) without reading its values."""
    try:
        if path.endswith(".npy"):
            return tuple(np.load(path, mmap_mode="r").shape)
        with zipfile.ZipFile(path) as archive:
            names = [n[:-4] for n in archive.namelist() if n.endswith(".npy")]
            if key not in names:
                raise _missing_key(path, key, field, names)
            with archive.open(key + ".npy") as f:
                reader = _HEADER_READERS.get(np.lib.format.read_magic(f))
                if reader is not None:
                    return tuple(reader(f)[0])
        return read_array(path, key, field).shape  # a newer header version: read the values
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise TanError(f"{path!r} cannot be read: {unreadable_reason(path, e)}") from None


def read_array(path, key, field):
    """float32 values of the array of ``path`` (a .npy, or ``key`` of a .npz)."""
    return _read(path, key, field, np.float32)


def read_stored_array(path, key, field):
    """The array of ``path`` (a .npy, or ``key`` of a .npz) in the dtype it is stored in."""
    return _read(path, key, field, None)


def _read(path, key, field, dtype):
    try:
        if path.endswith(".npy"):
            array = np.load(path, allow_pickle=False)
        else:
            with np.load(path, allow_pickle=False) as data:
                if key not in data:
                    raise _missing_key(path, key, field, data.files)
                array = data[key]
        return array if dtype is None else np.asarray(array, dtype=dtype)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise TanError(f"{path!r} cannot be read: {unreadable_reason(path, e)}") from None


def write_npz(f, arrays):
    """An uncompressed .npz of ``arrays`` ({name: array}) into the open binary file ``f``, as np.savez
    writes it; any name works, where np.savez(f, **arrays) fails for "file" or "allow_pickle"."""
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
