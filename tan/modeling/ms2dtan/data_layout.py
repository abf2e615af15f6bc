"""MS-2D-TAN's data as its repository lays it out, as built-in dataset names
(docs/ms2dtan.md §8): with DATASETS.ROOT its ``data`` folder,
``ms2dtan_{benchmark}_{features}_{split}`` reads its annotation files and the
HDF5 feature file of that kind, and its GloVe vectors sit in the benchmark's
``.vector_cache``. Also the two annotation formats its loader reads differently
from tan's own: TACoS video ids without their extension, Charades-STA
sentences without their final period."""
import dataclasses
import os

from ...data.catalog import register_builtin
from ...data.formats import register_format
from ...data.formats.charades_txt import read as read_charades_txt
from ...data.formats.tacos import read as read_tacos

# benchmark: (its folder, splits, annotation file, format, durations file, {features: HDF5 file stem})
BENCHMARKS = {
    "charades": ("Charades-STA", ("train", "test"), "charades_sta_{split}.txt", "charades_txt_trimmed",
                 "Charades_v1_{split}.csv", {"i3d": "charades_i3d_rgb_25fps", "c3d": "charades_c3d_fc6_nonoverlap",
                                             "vgg": "vgg_rgb_features", "i3d_finetuned": "i3d_adam_epoch16_25fps"}),
    "tacos": ("TACoS", ("train", "val", "test"), "{split}.json", "tacos_video_stems", None,
              {"c3d": "tacos_c3d_fc6_nonoverlap", "i3d": "i3d_imagenet", "vgg": "vgg_fc7"}),
    "activitynet": ("ActivityNet", ("train", "val", "test"), "{split}.json", "seconds", None,
                    {"c3d": "activitynet_c3d_fc6_stride_1s", "i3d": "cmcs_features"}),
}
WORD_VECTORS = ".vector_cache/glove.6B.300d.txt"  # in each benchmark's folder, where its loader caches GloVe


@register_format("tacos_video_stems")
def read_tacos_stems(path, durations, counts):
    """TACoS's JSON ("tacos") with each video id's extension dropped ("s13-d21.avi" -> "s13-d21"),
    as MS-2D-TAN's feature files name the videos."""
    return [dataclasses.replace(q, video=os.path.splitext(q.video)[0]) for q in read_tacos(path, durations, counts)]


@register_format("charades_txt_trimmed")
def read_charades_trimmed(path, durations, counts):
    """Charades-STA's text form ("charades_txt") with each sentence's final period dropped, as
    MS-2D-TAN's loader reads it: tan's tokens would otherwise give the LSTM one more word, "."."""
    queries = read_charades_txt(path, durations, counts)
    return [dataclasses.replace(q, sentence=q.sentence.rstrip()[:-1]) if q.sentence.rstrip().endswith(".") else q
            for q in queries]


def dataset_name(benchmark, features):
    return f"ms2dtan_{benchmark}_{features}"


for _benchmark, (_folder, _splits, _annotations, _format, _durations, _features) in BENCHMARKS.items():
    for _kind, _stem in _features.items():
        _entry = {"annotations": f"{_folder}/{_annotations}", "features": f"{_folder}/{_stem}.hdf5", "format": _format}
        if _durations:
            _entry["durations"] = f"{_folder}/{_durations}"
        register_builtin(dataset_name(_benchmark, _kind), _splits, _entry)
