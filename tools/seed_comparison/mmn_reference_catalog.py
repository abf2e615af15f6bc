"""MCG-NJU/MMN's DatasetCatalog for the generated dataset: its TACoS reader on the files under
$REF_DATA (set by mmn_cpu.py), those chenjoya/2dtan's catalog names (its reader takes no videos' folder)."""
from reference_catalog import ROOT, tacos_files


class DatasetCatalog:
    DATA_DIR = ROOT

    @staticmethod
    def get(name):
        return dict(factory="TACoSDataset", args=tacos_files(name))
