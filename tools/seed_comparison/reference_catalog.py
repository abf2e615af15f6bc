"""chenjoya/2dtan's DatasetCatalog for the generated dataset: its TACoS reader on the files under
$REF_DATA (set by chenjoya_cpu.py). MMN's catalog (mmn_reference_catalog.py) names the same files."""
import os

SPLITS = ("tacos_train", "tacos_val", "tacos_test")
ROOT = os.environ.get("REF_DATA", "datasets")


def tacos_files(name):
    """The annotation and feature files of the split ``name`` under $REF_DATA, as its TACoS reader's arguments."""
    if name not in SPLITS:
        raise RuntimeError(f"Dataset not available: {name}")
    return dict(ann_file=os.path.join(ROOT, "tacos", "annotations", f"{name.split('_')[1]}.json"),
                feat_file=os.path.join(ROOT, "tacos", "features", "tall_c3d_features.hdf5"))


class DatasetCatalog:
    DATA_DIR = ROOT

    @staticmethod
    def get(name):
        # and the videos' folder, which its reader takes but does not open here
        return dict(factory="TACoSDataset", args=dict(root=os.path.join(ROOT, "tacos", "videos"), **tacos_files(name)))
