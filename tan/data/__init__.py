from .build import ALL_SPLITS, RunData, build_datasets, check_batch_sizes, make_data_loader, word_vector_cache_dir
from .catalog import DatasetCatalog
from .prediction_inputs import SentenceEncoder, VideoSource, sentence_encoder
from .word_index import WordVectorIndex

__all__ = ["ALL_SPLITS", "RunData", "check_batch_sizes", "make_data_loader", "build_datasets", "word_vector_cache_dir",
           "DatasetCatalog", "VideoSource", "SentenceEncoder", "WordVectorIndex",
           "sentence_encoder"]
