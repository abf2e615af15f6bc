"""What the demo page offers: the checkpoints found under the paths it was started with, and
video files, those of the folders given and those uploaded while it runs."""
import os
import re
import socket
import threading
from dataclasses import dataclass

from tan_apps.cli.checkpoints import expand_checkpoints
from tan.errors import TanError
from tan.utils.io import sync_folder, temporary_beside
from tan.video.extract import VIDEO_EXTENSIONS, list_videos

# How deep below a folder given to look for run folders (OUTPUT_DIRs holding *.pth):
# outputs/ -> outputs/experiment/seed_1/model_final.pth is two levels down.
SEARCH_DEPTH = 4
UPLOAD_CHUNK = 1 << 20
_UPLOADED = re.compile(r"(\d{3,})-(.+)")  # an upload as stored: "NNN-" + its cleaned name


@dataclass(frozen=True)
class CheckpointChoice:
    """A checkpoint the page lists: ``id`` (what the page sends back), its path, its run's
    folder (as shown) and its file name."""
    id: str
    path: str
    run: str
    name: str


@dataclass(frozen=True)
class VideoChoice:
    """A video the page lists: ``id``, its path, the name shown and whether it was uploaded."""
    id: str
    path: str
    name: str
    uploaded: bool = False

    def as_json(self):
        try:
            size = os.path.getsize(self.path)
        except OSError:  # deleted or moved since it was listed: the page still loads
            size = None
        return {"id": self.id, "name": self.name, "uploaded": self.uploaded, "bytes": size}


def _shown(path):
    """A folder as the user would type it: relative to here when below here."""
    relative = os.path.relpath(os.path.abspath(path))
    return os.path.abspath(path) if relative.startswith("..") else relative


def run_folders(root, depth=SEARCH_DEPTH):
    """The folders at or below ``root`` (``depth`` levels at most, hidden ones skipped) holding a *.pth file."""
    found = []
    for folder, subfolders, files in os.walk(root):
        level = os.path.relpath(folder, root).count(os.sep) + (folder != root)
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".")) if level < depth else []
        if any(f.endswith(".pth") for f in files):
            found.append(folder)
    return sorted(found)


def find_checkpoints(specs):
    """Checkpoint files, run folders or folders of runs -> [CheckpointChoice]: run by run, each
    run's newest first (best, final, then epochs from the last), each file once."""
    choices, seen = [], set()
    for spec in specs:
        if os.path.isdir(spec):
            runs = [expand_checkpoints([folder]) for folder in run_folders(spec)]
            if not runs:
                raise TanError(f"{spec!r}: no checkpoint (*.pth) in this folder or in the folders below it "
                               f"(looked {SEARCH_DEPTH} levels down)")
        elif os.path.isfile(spec):
            runs = [expand_checkpoints([spec])]
        else:
            raise TanError(f"{spec!r}: no such checkpoint or folder")
        for paths in runs:
            for path in reversed(paths):
                if os.path.abspath(path) not in seen:
                    seen.add(os.path.abspath(path))
                    choices.append(CheckpointChoice(f"c{len(choices)}", path, _shown(os.path.dirname(path) or "."),
                                                    os.path.basename(path)))
    return choices


class VideoShelf:
    """The videos of the folders (or files) given, then the uploads: those already in ``upload_dir``
    (a folder kept from an earlier session) and those received while the page runs."""

    def __init__(self, paths, upload_dir, max_upload_bytes):
        self.upload_dir = upload_dir
        self.max_upload_bytes = max_upload_bytes
        self._lock = threading.Lock()
        self._videos = [VideoChoice(f"v{i}", path, vid + os.path.splitext(path)[1])
                        for i, (vid, path) in enumerate(list_videos(paths) if paths else [])]
        self._uploads = 0  # ids of uploads, this session's own count: file numbers may repeat across sessions
        for number, name, shown in sorted(_stored_uploads(upload_dir)):
            self._uploads += 1
            self._videos.append(VideoChoice(f"u{self._uploads}", os.path.join(upload_dir, name), shown, uploaded=True))

    def all(self):
        with self._lock:
            return list(self._videos)

    def get(self, video_id):
        for video in self.all():
            if video.id == video_id:
                return video
        raise TanError(f"video {video_id!r}: not one of the page's videos (reload the page)")

    def receive(self, name, body, length):
        """Store an upload of ``length`` bytes read from ``body`` (a file object) under the name it
        came with; the file appears whole or not at all, and never in place of another."""
        name = os.path.basename(str(name).replace("\\", "/")).strip()
        extension = os.path.splitext(name)[1].lower()
        if extension not in VIDEO_EXTENSIONS:
            raise TanError(f"{name!r} is not a video file by its name: expected one of {' '.join(VIDEO_EXTENSIONS)}")
        if length > self.max_upload_bytes:
            raise TanError(f"{name!r} is {megabytes(length)}; this page takes uploads of up to "
                           f"{megabytes(self.max_upload_bytes)} (tan-demo --max-upload-mb)")
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.splitext(name)[0])[:80] or "video"
        try:
            with temporary_beside(os.path.join(self.upload_dir, f"{stem}{extension}")) as partial:
                _copy(body, partial, length, name)
                path = self._publish(partial, f"{stem}{extension}")
            sync_folder(self.upload_dir)
        except (ConnectionError, TimeoutError, socket.timeout):  # the client's side: the server says so
            raise
        except OSError as e:
            raise TanError(f"cannot store the upload {name!r} in {self.upload_dir}: {e.strerror or e}") from None
        with self._lock:
            self._uploads += 1
            video = VideoChoice(f"u{self._uploads}", path, name, uploaded=True)
            self._videos.append(video)
        return video

    def _publish(self, partial, filename):
        """Put the received file in place as "NNN-filename", NNN above every number in the folder,
        never over a file: a hard link fails where a file is (another session's upload, just
        now), where a rename would replace it; where links are not supported, the name is
        reserved first (O_EXCL) and the reservation replaced."""
        while True:
            number = max((n for n, _, _ in _stored_uploads(self.upload_dir)), default=0) + 1
            path = os.path.join(self.upload_dir, f"{number:03d}-{filename}")
            try:
                os.link(partial, path)
                return path
            except FileExistsError:
                continue
            except OSError:  # no hard links on this file system
                try:
                    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                except FileExistsError:
                    continue
                os.replace(partial, path)
                return path


def _stored_uploads(folder):
    """[(number, file name, name shown)] of the uploads stored in ``folder``."""
    found = []
    for name in os.listdir(folder):
        match = _UPLOADED.fullmatch(name)
        if match and name.lower().endswith(VIDEO_EXTENSIONS):
            found.append((int(match.group(1)), name, match.group(2)))
    return found


def _copy(body, path, length, name):
    with open(path, "wb") as f:
        left = length
        while left:
            chunk = body.read(min(UPLOAD_CHUNK, left))
            if not chunk:
                raise TanError(f"the upload of {name!r} stopped after {length - left} of {length} bytes")
            f.write(chunk)
            left -= len(chunk)
        f.flush()
        os.fsync(f.fileno())


def megabytes(size):
    return f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{size / 1e3:.1f} kB"
