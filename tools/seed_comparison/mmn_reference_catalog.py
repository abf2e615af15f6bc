"""MCG-NJU/MMN's DatasetCatalog for the generated dataset: its TACoS reader on the files under
$REF_DATA (set by mmn_cpu.py)."""
import os

SPLITS = ("tacos_train", "tacos_val", "tacos_test")


class DatasetCatalog:
    DATA_DIR = os.environ.get("REF_DATA", "dataset")

    @staticmethod
    def get(name):
        if name not in SPLITS:
            raise RuntimeError(f"Dataset not available: {name}")
        root = DatasetCatalog.DATA_DIR
        return dict(factory="TACoSDataset", args=dict(
            ann_file=os.path.join(root, "tacos", "annotations", f"{name.split('_')[1]}.json"),
            feat_file=os.path.join(root, "tacos", "features", "tall_c3d_features.hdf5")))
