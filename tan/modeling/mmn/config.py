"""MMN's settings (docs/mmn.md): MODEL.MMN, with the shared 2D-map keys, the
joint space, the text encoder and the mutual matching loss, and three keys
outside it (SOLVER.FREEZE_BERT, SOLVER.ONLY_IOU, TEST.CONTRASTIVE_SCORE_POW).
Key names and defaults are those of MCG-NJU/MMN, so that its YAML files load
unchanged."""
from yacs.config import CfgNode as CN

from ...config.models import need
from ...config.setup import is_int, value_at
from ..map2d.config import (add_map_config, check_counts, check_even_when_bidirectional, check_map_counts, valid_cells,
                            validate_map)


# MODEL.MMN.TEXT_ENCODER.NAME: DistilBERT over word pieces, or an LSTM over GloVe vectors.
TEXT_ENCODERS = ("BERT", "LSTM")
# Where MMN's files put them, outside MODEL.MMN.
KEYS_OUTSIDE = ("SOLVER.FREEZE_BERT", "SOLVER.ONLY_IOU", "TEST.CONTRASTIVE_SCORE_POW")


def add_mmn_config(cfg):
    node = cfg.MODEL.MMN = add_map_config(CN())
    # J: size of the joint space where cells and sentences are compared.
    node.JOINT_SPACE_SIZE = 256

    node.TEXT_ENCODER = CN()
    # "BERT": DistilBERT over word pieces (needs the transformers package, the
    # "bert" extra); "LSTM" (tan): an LSTM over the GloVe vectors of INPUT.WORD_VECTORS.
    node.TEXT_ENCODER.NAME = "BERT"
    node.TEXT_ENCODER.BERT = CN()
    # (tan) A model name of the Hugging Face hub (downloaded by transformers on
    # first use and cached) or a local folder holding a DistilBERT model and its
    # tokenizer (save_pretrained). A relative folder is taken from the current directory.
    node.TEXT_ENCODER.BERT.PRETRAINED = "distilbert-base-uncased"
    # (tan) Learning rate of the DistilBERT weights, as a multiple of SOLVER.LR (MMN: 0.1).
    node.TEXT_ENCODER.BERT.LR_SCALE = 0.1
    node.TEXT_ENCODER.LSTM = CN()
    # (tan) Size of the sentence vector (summed over directions when bidirectional).
    node.TEXT_ENCODER.LSTM.HIDDEN_SIZE = 512
    # (tan) Number of stacked LSTM layers.
    node.TEXT_ENCODER.LSTM.NUM_LAYERS = 3
    # (tan) Bidirectional LSTM (each direction then has HIDDEN_SIZE // 2 units).
    node.TEXT_ENCODER.LSTM.BIDIRECTIONAL = False

    # Weight of the IoU branch's BCE (MMN defines it and leaves it 1).
    node.LOSS.BCE_WEIGHT = 1.0
    # k: a sentence's positive cells are the k cells of highest IoU with its moment (MMN's spelling).
    node.LOSS.NUM_POSTIVE_VIDEO_PROPOSAL = 1
    # Cells of the sentence's own video with IoU below this are its negatives.
    node.LOSS.NEGATIVE_VIDEO_IOU = 0.5
    # Sentences of the same video whose moments overlap a sentence's moment with
    # IoU at or above this are not used as its negatives.
    node.LOSS.SENT_REMOVAL_IOU = 0.5
    # Defined by MMN and unused by its code; accepted so its files load, and must stay 0.
    node.LOSS.PAIRWISE_SENT_WEIGHT = 0.0
    # Weight of the two contrastive terms (video-to-sentence and sentence-to-video).
    node.LOSS.CONTRASTIVE_WEIGHT = 0.05
    # Temperature of the video-to-sentence term.
    node.LOSS.TAU_VIDEO = 0.2
    # Temperature of the sentence-to-video term.
    node.LOSS.TAU_SENT = 0.2
    # Margin subtracted from the positive pair's similarity.
    node.LOSS.MARGIN = 0.2

    # Epochs 1..FREEZE_BERT train with the DistilBERT weights frozen.
    cfg.SOLVER.FREEZE_BERT = 4
    # After this epoch the contrastive terms are scaled by 0.01, so that
    # training continues mainly on the IoU branch (docs/mmn.md §4).
    cfg.SOLVER.ONLY_IOU = 7
    # Test score of a cell: ((c + 1) / 2) ** CONTRASTIVE_SCORE_POW * s_iou,
    # c its matching cosine and s_iou its IoU score (docs/mmn.md §5).
    cfg.TEST.CONTRASTIVE_SCORE_POW = 0.5


def validate_mmn_config(cfg):
    """MMN's sizes, loss and score settings (docs/mmn.md)."""
    mmn = cfg.MODEL.MMN
    check_map_counts(cfg)
    check_counts(cfg, ("JOINT_SPACE_SIZE", "LOSS.NUM_POSTIVE_VIDEO_PROPOSAL", "TEXT_ENCODER.LSTM.HIDDEN_SIZE",
                       "TEXT_ENCODER.LSTM.NUM_LAYERS"))
    for key in ("SOLVER.FREEZE_BERT", "SOLVER.ONLY_IOU"):
        value = value_at(cfg, key)
        need(is_int(value) and value >= 0, key, f"expected an integer >= 0, got {value!r}")
    validate_map(cfg)
    check_even_when_bidirectional(cfg, mmn.TEXT_ENCODER.LSTM, "TEXT_ENCODER.LSTM.HIDDEN_SIZE",
                                  mmn.TEXT_ENCODER.LSTM.HIDDEN_SIZE)
    loss = mmn.LOSS
    for name in ("TAU_VIDEO", "TAU_SENT"):
        need(loss[name] > 0, f"MODEL.MMN.LOSS.{name}", f"expected a positive temperature, got {loss[name]}")
    for name in ("NEGATIVE_VIDEO_IOU", "SENT_REMOVAL_IOU"):
        need(0.0 <= loss[name] <= 1.0, f"MODEL.MMN.LOSS.{name}", f"expected an IoU in [0, 1], got {loss[name]}")
    for name in ("CONTRASTIVE_WEIGHT", "BCE_WEIGHT", "MARGIN"):
        need(loss[name] >= 0, f"MODEL.MMN.LOSS.{name}", f"expected a value >= 0, got {loss[name]}")
    need(loss.PAIRWISE_SENT_WEIGHT == 0, "MODEL.MMN.LOSS.PAIRWISE_SENT_WEIGHT",
         f"MMN defines this key but its code never uses it, and neither does tan; expected 0, "
         f"got {loss.PAIRWISE_SENT_WEIGHT}")
    cells = valid_cells(mmn.NUM_CLIPS, mmn.FEAT2D.POOLING_COUNTS)
    need(loss.NUM_POSTIVE_VIDEO_PROPOSAL <= cells, "MODEL.MMN.LOSS.NUM_POSTIVE_VIDEO_PROPOSAL",
         f"{loss.NUM_POSTIVE_VIDEO_PROPOSAL} positive cells asked for, but the map has {cells} valid cells")
    encoder = mmn.TEXT_ENCODER
    need(encoder.NAME in TEXT_ENCODERS, "MODEL.MMN.TEXT_ENCODER.NAME",
         f"expected {' or '.join(repr(x) for x in TEXT_ENCODERS)}, got {encoder.NAME!r}")
    need(encoder.BERT.LR_SCALE >= 0, "MODEL.MMN.TEXT_ENCODER.BERT.LR_SCALE",
         f"expected a value >= 0, got {encoder.BERT.LR_SCALE}")
    need(cfg.TEST.CONTRASTIVE_SCORE_POW >= 0, "TEST.CONTRASTIVE_SCORE_POW",
         f"expected a value >= 0, got {cfg.TEST.CONTRASTIVE_SCORE_POW}")
    need(not (cfg.INPUT.SENTENCE_FEATURES and encoder.NAME == "BERT"), "INPUT.SENTENCE_FEATURES",
         "precomputed sentence features replace the word input, but MODEL.MMN.TEXT_ENCODER.NAME 'BERT' reads "
         "the sentence's text; set MODEL.MMN.TEXT_ENCODER.NAME LSTM")
