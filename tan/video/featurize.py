"""Features made again as a trained run's records say (tan/data/features/provenance.py):
a video file's rows for every stream the model was trained on, joined as the
datasets join them, and new sentences' token features for a model trained on
precomputed sentence features. The same backbone, weights (checked by their
digest) and sampling are used, so the model sees rows of the kind it learnt;
a plug-in's backbone is found through the plug-in its record names, imported
here unless the config's PLUGINS imported it already."""
import os

import numpy as np

from ..config.plugins import import_plugin
from ..data.features.provenance import describe_extractor
from ..data.features.rows import l2_normalize_rows
from ..data.features.sources import join_streams
from ..errors import TanError
from .backbones import text_backbone, video_backbone
from .backbones.base import DTYPES
from .decode import VideoError, check_sampling, clip_chunks
from .release import encode_streams, stored
from .release_sampling import sampling_of_record


def recorded_model(record, models=None):
    """Where to load the record's model from: ``models`` ({recorded name or its last part: new place})
    first, else the recorded name; an error when it is a folder that is gone."""
    name = record.get("model", "")
    models = models or {}
    for key in (name, os.path.basename(name.rstrip("/"))):
        if key in models:
            return models[key]
    if os.path.isabs(name) and not os.path.exists(name):
        kind = "weights file" if os.path.splitext(name)[1] else "folder"
        raise TanError(f"the features this model was trained on were made by {describe_extractor(record)}, and "
                       f"the {kind} {name!r} is not there; give its place on this machine with --extractor-model "
                       f"{os.path.basename(name.rstrip('/'))}={kind.split()[-1].upper()}{_where_to_get(record)}")
    return name


def _where_to_get(record):
    from .weights.caffe2 import SOURCE as SLOWFAST_SOURCE
    from .weights.openai_clip import SOURCE as CLIP_SOURCE

    name = str(record.get("model", ""))
    if record.get("backbone") == "slowfast":
        return f" ({SLOWFAST_SOURCE})"
    if record.get("backbone") == "clip" and name.endswith((".pt", ".pth")):
        return f" ({CLIP_SOURCE})"
    return ""


# How PLUGINS names a plug-in again on the command line of tan-predict / tan-demo, or in load_model's
# overrides: it replaces the config's own list, which must then be given too.
PLUGINS_AGAIN = "PLUGINS on the command line, beside the config's own plug-ins, e.g. PLUGINS \"['{}']\""


def build_recorded(record, device, models=None):
    """The backbone of ``record``, with the recorded weights (an error when the digest differs)."""
    dtype = DTYPES.get(record.get("dtype", "float32"), DTYPES["float32"])
    cls = recorded_class(record)
    backbone = cls(recorded_model(record, models), device, dtype, **cls.options_of(record))
    if record.get("weights") and backbone.weights != record["weights"]:
        raise TanError(f"{backbone.model_name!r} holds other weights ({backbone.weights[:19]}...) than the "
                       f"extractor this model's features came from ({describe_extractor(record)}): its rows "
                       f"would mean something else to the model")
    return backbone


def recorded_class(record):
    """The class of the record's backbone: the one registered under its name (built in, or a plug-in's
    that the config's PLUGINS imported), else the one that the plug-in the record names registers once
    it is imported here."""
    lookup = video_backbone if record.get("kind", "video") == "video" else text_backbone
    name, plugin = record["backbone"], record.get("plugin")
    if not plugin:
        return lookup(name, hint=f"the features this model was trained on were made by a backbone of that name "
                                 f"whose record names no plug-in: import the plug-in that registers it with "
                                 f"{PLUGINS_AGAIN.format('my_backbones.py')}")
    try:
        return lookup(name)
    except TanError:  # not imported by the config: the recorded plug-in is
        import_recorded_plugin(record)
    return lookup(name, hint=f"plug-in {plugin!r}, which its extractor record names, was imported and registers "
                             f"none of that name")


def import_recorded_plugin(record):
    """Import the plug-in that ``record`` names: an error naming it when its recorded path is gone."""
    plugin = record["plugin"]
    if os.path.isabs(plugin) and not os.path.exists(plugin):
        raise TanError(f"the features this model was trained on were made by {describe_extractor(record)}, the "
                       f"backbone of plug-in {plugin!r}, which is not there; put it back, or import it from where "
                       f"it is now: {PLUGINS_AGAIN.format('/new/place/' + os.path.basename(plugin))}")
    import_plugin(plugin, f"the extractor record of backbone {record['backbone']!r}")


def no_records(what):
    return TanError(f"this model's checkpoint does not say how its {what} were made (they were not written by "
                    f"tan-extract-features, or the checkpoint predates records): extract the video's features "
                    f"with the extractor used for training and pass them with --features")


class VideoFeaturizer:
    """A video file -> ([T, D] features as the model's datasets read them, duration in seconds)."""

    def __init__(self, extractors, device, models=None, clips_per_chunk=16):
        streams = (extractors or {}).get("features") or []
        if not streams or any(r is None for r in streams):
            raise no_records("video features")
        self.records = streams
        self.backbones = [build_recorded(r, device, models) for r in streams]
        # Released features' streams come from one decode of the file; others are each sampled on their own.
        self.release = [sampling_of_record(r) for r in streams]
        self.samplings = [check_sampling(r["frame_rate"], r["clip_seconds"], r["resolution"]) if s is None else None
                          for r, s in zip(streams, self.release)]
        self.clips_per_chunk = clips_per_chunk

    def __call__(self, path):
        try:
            if all(s is not None for s in self.release):  # every stream from one decode
                arrays, duration = encode_streams(path, self.backbones, self.release, self.clips_per_chunk,
                                                  desc=os.path.basename(path))
            else:
                parts = [self._stream(path, i) for i in range(len(self.backbones))]
                arrays, duration = [p[0] for p in parts], parts[-1][1]
        except VideoError as e:
            raise TanError(f"video file {path!r}: {e}") from None
        arrays = [stored(a, r["storage"]) if r.get("storage") else a for a, r in zip(arrays, self.records)]
        return join_streams(arrays), duration

    def _stream(self, path, i):
        backbone = self.backbones[i]
        if self.release[i] is not None:
            arrays, duration = encode_streams(path, [backbone], [self.release[i]], self.clips_per_chunk)
            return arrays[0], duration
        rows, duration = [], None
        for chunk in clip_chunks(path, self.samplings[i], self.clips_per_chunk):
            if len(chunk.frames):
                rows.append(backbone.encode(chunk.frames))
            duration = chunk.end if chunk.end is not None else duration
        return np.concatenate(rows).astype(np.float32), duration


class SentenceFeaturizer:
    """Sentences -> [L, E] token features, L2-normalised per row as precomputed ones are read
    (tan/data/text/sentence_features.py)."""

    def __init__(self, record, device, models=None):
        if record is None:
            raise no_records("sentence features")
        self.record = record
        self.backbone = build_recorded(record, device, models)

    def __call__(self, sentences):
        storage = self.record.get("storage")
        return [l2_normalize_rows(stored(hidden, storage) if storage else hidden)
                for hidden, _ in self.backbone.encode(list(sentences))]
