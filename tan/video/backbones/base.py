"""What every feature backbone provides, and the pieces they share: loading a
Hugging Face model with an error that says what to do, the digest of its
weights, and turning uint8 frames into a normalised batch."""
import hashlib
import json
import os

import numpy as np
import torch

from ...config.plugins import plugin_of
from ...errors import TanError


class VideoBackbone:
    """Clips of frames -> one feature row per clip.

    Subclasses set ``resolution`` (frames are S x S), ``dim`` (row width),
    ``frames_per_clip`` (None: any number, the clip's frames are averaged) and
    ``default_frame_rate(clip_seconds)``, and implement :meth:`encode`."""
    NAME = ""
    KIND = "video"
    frames_per_clip = None

    def __init__(self, model_name, device, dtype=torch.float32):
        self.model_name, self.device, self.dtype = model_name, torch.device(device), dtype

    def default_frame_rate(self, clip_seconds):
        per_clip = self.frames_per_clip or 1
        return per_clip / clip_seconds

    @torch.no_grad()
    def encode(self, frames):
        """``frames``: [K, F, S, S, 3] uint8 (array or tensor) -> [K, dim] float32 array."""
        raise NotImplementedError

    @classmethod
    def options_of(cls, record):
        """The keyword arguments, beyond model, device and dtype, that rebuild this backbone as
        ``record`` describes it."""
        return {}

    def record(self):
        """The fields of the extractor record (docs/video.md §3) that this backbone sets."""
        return {"backbone": self.NAME, **plugin_field(type(self)), "model": model_reference(self.model_name),
                "weights": self.weights, "dim": self.dim, "resolution": self.resolution,
                "dtype": dtype_name(self.dtype)}

    @classmethod
    def write_tiny(cls, folder, seed=0):
        """A tiny randomly initialised model of this kind, saved in ``folder`` as its loader reads it."""
        raise NotImplementedError


class TextBackbone:
    """Sentences -> token features [L, E] and a pooled sentence vector [P]."""
    NAME = ""
    KIND = "text"

    def __init__(self, model_name, device, dtype=torch.float32):
        self.model_name, self.device, self.dtype = model_name, torch.device(device), dtype

    @torch.no_grad()
    def encode(self, sentences):
        """[(last_hidden_state [L, E] float32, pooler_output [P] float32)], one per sentence."""
        raise NotImplementedError

    @classmethod
    def options_of(cls, record):
        return {}

    def record(self):
        return {"backbone": self.NAME, **plugin_field(type(self)), "model": model_reference(self.model_name),
                "weights": self.weights, "dim": self.dim, "dtype": dtype_name(self.dtype)}


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def dtype_name(dtype):
    return next(name for name, d in DTYPES.items() if d == dtype)


def plugin_field(cls):
    """{"plugin": how PLUGINS names the plug-in that defines backbone class ``cls``} (its path, for one
    imported by path), so that a process that rebuilds the backbone from the record (prediction from a
    video file) can import it; empty for a built-in backbone, whose records stay as they were."""
    plugin = plugin_of(cls.__module__)
    return {"plugin": plugin} if plugin else {}


def model_reference(name):
    """How a record names a model: a local folder or weights file by its absolute path (it is found
    again from anywhere), a hub name as it is."""
    return os.path.abspath(name) if os.path.exists(name) else name


def require_transformers():
    """An error that says what to install when transformers (the video extra) is missing."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise TanError("the built-in feature backbones need transformers, which is not installed: "
                       "pip install 'tan[video]'") from None


def quiet_transformers():
    """No progress bar per model load or save: the extraction's own bar is the one that says how far it is."""
    require_transformers()
    from transformers.utils import logging

    logging.disable_progress_bar()


def load_pretrained(loader, name, what):
    """``loader.from_pretrained(name)``, or an error naming the model and what to pass instead."""
    quiet_transformers()
    try:
        return loader.from_pretrained(name)
    except (OSError, ValueError, KeyError, EnvironmentError) as e:
        local = os.path.isdir(name)
        hint = ("the folder does not hold what save_pretrained writes" if local else
                "give a local folder written by save_pretrained, or a hub name that is cached here "
                "(HF_HOME) or can be downloaded")
        raise TanError(f"{what} {name!r} could not be loaded ({type(e).__name__}: {str(e).splitlines()[0]}); "
                       f"{hint}") from None


def weights_digest(module, statistics=False):
    """"sha256:<hex>" of a module's parameters (names, dtypes, shapes, bytes) in name order: the same
    weights give the same digest wherever they were loaded from. Buffers are left out: which of them
    a library saves (position ids, say) changes between its releases, not the weights; ``statistics``
    adds BatchNorm's running mean and variance, which a network in eval mode computes with."""
    digest = hashlib.sha256()
    tensors = dict(module.named_parameters())
    if statistics:
        tensors.update((n, b) for n, b in module.named_buffers() if n.endswith(("running_mean", "running_var")))
    for name, tensor in sorted(tensors.items()):
        tensor = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return "sha256:" + digest.hexdigest()


def preprocessor_settings(name, mean, std):
    """(mean, std) of the model's preprocessor_config.json (a folder's, or the hub cache's), else the given ones."""
    path = os.path.join(name, "preprocessor_config.json")
    if not os.path.isdir(name):
        try:
            from transformers.utils import cached_file
            path = cached_file(name, "preprocessor_config.json", _raise_exceptions_for_missing_entries=False)
        except Exception:  # noqa: BLE001  (no cache, no network: the defaults hold)
            path = None
    if path and os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            settings = json.load(f)
        mean, std = settings.get("image_mean", mean), settings.get("image_std", std)
    return [float(m) for m in mean], [float(s) for s in std]


class FrameNormalizer:
    """uint8 [..., S, S, 3] frames -> float [..., 3, S, S] on the device: scaled to [0, 1], minus the
    mean, over the standard deviation plus ``eps`` (per channel), in the backbone's dtype. The extractors
    that made the released features add 1e-8 to the deviation."""

    def __init__(self, mean, std, device, dtype, eps=0.0):
        self.mean = torch.tensor(mean, device=device, dtype=torch.float32).view(3, 1, 1)
        self.std = torch.tensor(std, device=device, dtype=torch.float32).view(3, 1, 1) + eps
        self.device, self.dtype = device, dtype

    def __call__(self, frames):
        frames = torch.as_tensor(np.ascontiguousarray(frames) if isinstance(frames, np.ndarray) else frames)
        x = frames.to(self.device, non_blocking=True).movedim(-1, -3).float().div_(255.0)
        return ((x - self.mean) / self.std).to(self.dtype)


def write_preprocessor(folder, mean, std, size):
    with open(os.path.join(folder, "preprocessor_config.json"), "w", encoding="utf-8") as f:
        json.dump({"image_mean": mean, "image_std": std, "crop_size": {"height": size, "width": size}}, f, indent=2)
