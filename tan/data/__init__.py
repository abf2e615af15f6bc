from .build import build_datasets, make_data_loader
from .catalog import DatasetCatalog

__all__ = ["make_data_loader", "build_datasets", "DatasetCatalog"]
