"""Data: catalog entries -> annotation records (formats/) -> clip features (features/) and
sentences (text/) -> datasets -> loaders, built once per run by RunData."""
from .build import ALL_SPLITS, RunData, build_datasets, make_data_loader
from .catalog import DatasetCatalog
from .loaders import check_batch_sizes
from .prediction_inputs import VideoSource, sentence_encoder
from .text.free_text import SentenceEncoder
from .text.word_index import WordVectorIndex

__all__ = ["ALL_SPLITS", "RunData", "check_batch_sizes", "make_data_loader", "build_datasets",
           "DatasetCatalog", "VideoSource", "SentenceEncoder", "WordVectorIndex",
           "sentence_encoder"]
