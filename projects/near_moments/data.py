"""``near_synthetic_{train,val,test}``: the built-in synthetic dataset's queries as near_jsonl files
(DATASETS.ROOT/near_synthetic/{split}.jsonl), written on first use, over its feature file."""
import json
import os

from tan.data.catalog import register_builtin
from tan.data.generated import GENERATORS, register_generator
from tan.errors import TanError
from tan.utils.io import atomic_write_text

SPLITS = ("train", "val", "test")
FOLDER = "near_synthetic"

register_builtin(FOLDER, SPLITS, {
    "annotations": FOLDER + "/{split}.jsonl", "features": "synthetic/features/synthetic_features.hdf5",
    "format": "near_jsonl", "generator": FOLDER})


def near_lines(annotations):
    """The near_jsonl lines of the per-video JSON layout ``annotations`` (the synthetic dataset's)."""
    lines = []
    for video, entry in annotations.items():
        for number, (stamp, sentence) in enumerate(zip(entry["timestamps"], entry["sentences"])):
            lines.append(json.dumps({"qid": f"{video}_{number}", "video": video, "duration": entry["duration"],
                                     "moment": stamp, "sentence": sentence}))
    return lines


@register_generator(FOLDER)
def ensure_near_synthetic(root):
    """Write the synthetic dataset if it is missing, then its queries as near_jsonl files."""
    if "synthetic" not in GENERATORS:
        raise TanError("near_synthetic is made from the built-in synthetic dataset, whose generator is not "
                       "registered: run a tan command, or import tan_apps.synthetic first")
    GENERATORS.get("synthetic")(root)
    os.makedirs(os.path.join(root, FOLDER), exist_ok=True)
    for split in SPLITS:
        path = os.path.join(root, FOLDER, f"{split}.jsonl")
        if not os.path.isfile(path):  # each file is written whole or not at all
            with open(os.path.join(root, "synthetic", "annotations", f"{split}.json")) as f:
                atomic_write_text(path, "\n".join(near_lines(json.load(f))) + "\n")
