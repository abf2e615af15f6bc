from .build import build_datasets, check_data_files, make_data_loader
from .catalog import DatasetCatalog

__all__ = ["make_data_loader", "build_datasets", "check_data_files", "DatasetCatalog"]
