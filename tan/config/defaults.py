"""Default configuration. Every key is documented; YAML files and command-line
``KEY VALUE`` pairs may only override keys that exist here.

Keys and defaults follow the reference re-implementation so that its YAML
files load unchanged; additions are marked "(tan)".
"""
from yacs.config import CfgNode as CN

_C = CN()

# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------
_C.MODEL = CN()
# Where the model runs: "auto" (CUDA when present, else CPU), "cpu", "cuda"
# or "cuda:N". Asking for CUDA on a machine without it is an error.
_C.MODEL.DEVICE = "auto"
# Name of the meta-architecture in tan.modeling.registry.META_ARCH_REGISTRY.
_C.MODEL.ARCHITECTURE = "TAN"
# Path of initial weights (model weights only) used when OUTPUT_DIR holds no
# checkpoint to resume from. Empty: start from random initialisation.
_C.MODEL.WEIGHT = ""
# (tan) Keep the 2D maps in channels-last memory layout, which tensor-core
# convolutions prefer on GPUs; results are the same.
_C.MODEL.CHANNELS_LAST = False

_C.MODEL.TAN = CN()
# N: number of clips of the 2D temporal map (the map is N x N).
_C.MODEL.TAN.NUM_CLIPS = 128

_C.MODEL.TAN.FEATPOOL = CN()
# D_in: dimension of the pre-extracted clip features.
_C.MODEL.TAN.FEATPOOL.INPUT_SIZE = 4096
# H: channels of the pooled clip features and of the 2D map.
_C.MODEL.TAN.FEATPOOL.HIDDEN_SIZE = 512
# Kernel of the average pooling from NUM_PRE_CLIPS rows to NUM_CLIPS rows; its
# stride is NUM_PRE_CLIPS // NUM_CLIPS.
_C.MODEL.TAN.FEATPOOL.KERNEL_SIZE = 2

_C.MODEL.TAN.FEAT2D = CN()
# How a cell (i, j) summarises clips i..j (docs/model.md §3): "pool", the
# element-wise max; "conv", a learned chain of 1D convolutions, as MMN builds
# it (weights feat2d.convs.*; docs/model.md §3.2).
_C.MODEL.TAN.FEAT2D.NAME = "pool"
# Sparse sampling of the 2D map: the first count uses stride 1, each later
# count doubles the stride (see docs/model.md §3.1). Sum of strided offsets
# must stay below NUM_CLIPS.
_C.MODEL.TAN.FEAT2D.POOLING_COUNTS = [15, 8, 8, 8]

_C.MODEL.TAN.INTEGRATOR = CN()
# Hq: size of the sentence vector (summed over directions when bidirectional).
_C.MODEL.TAN.INTEGRATOR.QUERY_HIDDEN_SIZE = 512
_C.MODEL.TAN.INTEGRATOR.LSTM = CN()
# Number of stacked LSTM layers of the sentence encoder.
_C.MODEL.TAN.INTEGRATOR.LSTM.NUM_LAYERS = 3
# Bidirectional LSTM (each direction then has QUERY_HIDDEN_SIZE // 2 units).
_C.MODEL.TAN.INTEGRATOR.LSTM.BIDIRECTIONAL = False

_C.MODEL.TAN.PREDICTOR = CN()
# Hp: channels of the stacked 2D convolutions.
_C.MODEL.TAN.PREDICTOR.HIDDEN_SIZE = 512
# K: kernel size of each 2D convolution.
_C.MODEL.TAN.PREDICTOR.KERNEL_SIZE = 5
# S: number of stacked 2D convolutions.
_C.MODEL.TAN.PREDICTOR.NUM_STACK_LAYERS = 8
# (tan) Compute each conv only over row strips of this many rows that cover
# the cells the valid outputs depend on (about half the dense work); 0 runs
# the dense convs of the reference. Same results up to float rounding.
_C.MODEL.TAN.PREDICTOR.STRIP_ROWS = 16

_C.MODEL.TAN.LOSS = CN()
# Temporal IoU mapped to target 0 (and below).
_C.MODEL.TAN.LOSS.MIN_IOU = 0.3
# Temporal IoU mapped to target 1 (and above).
_C.MODEL.TAN.LOSS.MAX_IOU = 0.7

# ---------------------------------------------------------------------------
# MMN (MODEL.ARCHITECTURE "MMN"; docs/mmn.md). Key names and defaults are
# those of MCG-NJU/MMN, so that its YAML files load unchanged.
# ---------------------------------------------------------------------------
_C.MODEL.MMN = CN()
# N: number of clips of the 2D temporal map (the map is N x N).
_C.MODEL.MMN.NUM_CLIPS = 128
# J: size of the joint space where cells and sentences are compared.
_C.MODEL.MMN.JOINT_SPACE_SIZE = 256

_C.MODEL.MMN.FEATPOOL = CN()
# D_in: dimension of the pre-extracted clip features.
_C.MODEL.MMN.FEATPOOL.INPUT_SIZE = 4096
# H: channels of the pooled clip features and of the 2D map.
_C.MODEL.MMN.FEATPOOL.HIDDEN_SIZE = 512
# Kernel of the average pooling from NUM_PRE_CLIPS rows to NUM_CLIPS rows.
_C.MODEL.MMN.FEATPOOL.KERNEL_SIZE = 2

_C.MODEL.MMN.FEAT2D = CN()
# "pool" (max over the clips) or "conv" (learned 1D convolutions), as MODEL.TAN.FEAT2D.NAME.
_C.MODEL.MMN.FEAT2D.NAME = "pool"
# Sparse sampling of the 2D map, as MODEL.TAN.FEAT2D.POOLING_COUNTS.
_C.MODEL.MMN.FEAT2D.POOLING_COUNTS = [15, 8, 8, 8]

_C.MODEL.MMN.TEXT_ENCODER = CN()
# "BERT": DistilBERT over word pieces (needs the transformers package, the
# "bert" extra); "LSTM" (tan): an LSTM over the GloVe vectors of INPUT.WORD_VECTORS.
_C.MODEL.MMN.TEXT_ENCODER.NAME = "BERT"
_C.MODEL.MMN.TEXT_ENCODER.BERT = CN()
# (tan) A model name of the Hugging Face hub (downloaded by transformers on
# first use and cached) or a local folder holding a DistilBERT model and its
# tokenizer (save_pretrained). A relative folder is taken from the current directory.
_C.MODEL.MMN.TEXT_ENCODER.BERT.PRETRAINED = "distilbert-base-uncased"
# (tan) Learning rate of the DistilBERT weights, as a multiple of SOLVER.LR (MMN: 0.1).
_C.MODEL.MMN.TEXT_ENCODER.BERT.LR_SCALE = 0.1
_C.MODEL.MMN.TEXT_ENCODER.LSTM = CN()
# (tan) Size of the sentence vector (summed over directions when bidirectional).
_C.MODEL.MMN.TEXT_ENCODER.LSTM.HIDDEN_SIZE = 512
# (tan) Number of stacked LSTM layers.
_C.MODEL.MMN.TEXT_ENCODER.LSTM.NUM_LAYERS = 3
# (tan) Bidirectional LSTM (each direction then has HIDDEN_SIZE // 2 units).
_C.MODEL.MMN.TEXT_ENCODER.LSTM.BIDIRECTIONAL = False

_C.MODEL.MMN.PREDICTOR = CN()
# Channels of the stacked 2D convolutions (each followed by batch norm).
_C.MODEL.MMN.PREDICTOR.HIDDEN_SIZE = 512
# Kernel size of each 2D convolution.
_C.MODEL.MMN.PREDICTOR.KERNEL_SIZE = 5
# Number of stacked 2D convolutions.
_C.MODEL.MMN.PREDICTOR.NUM_STACK_LAYERS = 8
# (tan) Compute each conv only over row strips of this many rows that cover
# the cells whose window is not all zeros (training) or that the valid outputs
# depend on (evaluation); 0 runs the dense convs of MMN. Same results up to
# float rounding (docs/mmn.md §2.1).
_C.MODEL.MMN.PREDICTOR.STRIP_ROWS = 16

_C.MODEL.MMN.LOSS = CN()
# IoU mapped to target 0 (and below) by the IoU branch's BCE.
_C.MODEL.MMN.LOSS.MIN_IOU = 0.3
# IoU mapped to target 1 (and above) by the IoU branch's BCE.
_C.MODEL.MMN.LOSS.MAX_IOU = 0.7
# Weight of the IoU branch's BCE (MMN defines it and leaves it 1).
_C.MODEL.MMN.LOSS.BCE_WEIGHT = 1.0
# k: a sentence's positive cells are the k cells of highest IoU with its moment (MMN's spelling).
_C.MODEL.MMN.LOSS.NUM_POSTIVE_VIDEO_PROPOSAL = 1
# Cells of the sentence's own video with IoU below this are its negatives.
_C.MODEL.MMN.LOSS.NEGATIVE_VIDEO_IOU = 0.5
# Sentences of the same video whose moments overlap a sentence's moment with
# IoU at or above this are not used as its negatives.
_C.MODEL.MMN.LOSS.SENT_REMOVAL_IOU = 0.5
# Defined by MMN and unused by its code; accepted so its files load, and must stay 0.
_C.MODEL.MMN.LOSS.PAIRWISE_SENT_WEIGHT = 0.0
# Weight of the two contrastive terms (video-to-sentence and sentence-to-video).
_C.MODEL.MMN.LOSS.CONTRASTIVE_WEIGHT = 0.05
# Temperature of the video-to-sentence term.
_C.MODEL.MMN.LOSS.TAU_VIDEO = 0.2
# Temperature of the sentence-to-video term.
_C.MODEL.MMN.LOSS.TAU_SENT = 0.2
# Margin subtracted from the positive pair's similarity.
_C.MODEL.MMN.LOSS.MARGIN = 0.2

# ---------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------
_C.INPUT = CN()
# P: rows each video's features are resampled to before the feature pooling.
_C.INPUT.NUM_PRE_CLIPS = 256
# E: dimension of the word vectors (300 for GloVe), or of the precomputed
# sentence features (512 for CLIP's token features) with SENTENCE_FEATURES.
_C.INPUT.PRE_QUERY_SIZE = 300
# (tan) True: sentences enter as precomputed token features, one file per query
# in the folder named by each dataset's catalog field "text_features" (e.g.
# lighthouse's CLIP "last_hidden_state"), and no word-vector file is read.
# For MMN, with MODEL.MMN.TEXT_ENCODER.NAME "LSTM". docs/data.md §9.3.
_C.INPUT.SENTENCE_FEATURES = False
# (tan) GloVe-format text file of word vectors ("word v1 ... vE" per line).
# A relative path is taken from DATASETS.ROOT.
_C.INPUT.WORD_VECTORS = "glove/glove.840B.300d.txt"
# (tan) Resampled videos kept in memory per dataset (and per loader worker);
# 0 keeps none and reads each item's video from the feature file.
_C.INPUT.FEATURE_CACHE_SIZE = 32
# (tan) Feature streams of one dataset (a catalog entry listing several
# features) are resampled to the longest one's length; lengths differing by
# more than this fraction of the longest (and by more than 2 rows) stop the
# run, naming the video. docs/data.md §3.
_C.INPUT.FEATURE_LENGTH_TOLERANCE = 0.1

# ---------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------
_C.DATASETS = CN()
# (tan) Folder that relative dataset and word-vector paths are taken from.
_C.DATASETS.ROOT = "datasets"
# (tan) Optional YAML or JSON file registering more datasets by name (see
# README "Registering a dataset"). A relative path is taken from ROOT.
_C.DATASETS.CATALOG = ""
# (tan) Folder for caches of prepared data (the word vectors the datasets use),
# relative to ROOT; OUTPUT_DIR/cache when it cannot be written.
_C.DATASETS.CACHE_DIR = "cache"
# (MMN) The benchmark's name ("tacos", "activitynet", "charades"); MMN picks
# the IoU columns of its table by it. tan reports every threshold, so here it
# only labels the run.
_C.DATASETS.NAME = ""
# Names of the training datasets (concatenated).
_C.DATASETS.TRAIN = ()
# (tan) Names of the datasets evaluated every SOLVER.TEST_PERIOD epochs during
# training. Empty: the reference's habit, evaluate DATASETS.TEST.
_C.DATASETS.VAL = ()
# Names of the datasets evaluated after training, each reported separately.
_C.DATASETS.TEST = ()

# ---------------------------------------------------------------------------
# Data loader
# ---------------------------------------------------------------------------
_C.DATALOADER = CN()
# Loader worker processes per training process (0 loads in the main process).
_C.DATALOADER.NUM_WORKERS = 4
# (tan) For models trained on batches of videos (MMN): at most this many of a
# video's sentences per training item, drawn anew each epoch; 0 takes them all
# (MMN's habit). Evaluation always takes them all.
_C.DATALOADER.SENTENCES_PER_VIDEO = 0

# ---------------------------------------------------------------------------
# Solver
# ---------------------------------------------------------------------------
_C.SOLVER = CN()
# Number of training epochs (epochs are counted from 1).
_C.SOLVER.MAX_EPOCH = 12
# Adam learning rate.
_C.SOLVER.LR = 0.01
# Save model_{epoch}e.pth every this many epochs (0: only model_final.pth).
_C.SOLVER.CHECKPOINT_PERIOD = 1
# Evaluate on the validation datasets every this many epochs (0: never).
_C.SOLVER.TEST_PERIOD = 1
# Training batch size over all processes: queries per optimisation step for
# TAN; videos (each with its sentences) for MMN.
_C.SOLVER.BATCH_SIZE = 32
# (tan) End each epoch after this many iterations (0: a full pass over the
# training data). For quick experiments on large datasets.
_C.SOLVER.ITERS_PER_EPOCH = 0
# Epochs after which the learning rate is multiplied by 0.1.
_C.SOLVER.MILESTONES = (8, 11)
# (MMN) Epochs 1..FREEZE_BERT train with the DistilBERT weights frozen.
_C.SOLVER.FREEZE_BERT = 4
# (MMN) After this epoch the contrastive terms are scaled by 0.01, so that
# training continues mainly on the IoU branch (docs/mmn.md §4).
_C.SOLVER.ONLY_IOU = 7
# (MMN) Periodic evaluation starts at this epoch (0 or 1: from the first).
_C.SOLVER.SKIP_TEST = 0
# (MMN) Accepted so MMN's files load. tan always resumes from OUTPUT_DIR's
# latest checkpoint, exactly and mid-epoch, so it is not needed.
_C.SOLVER.RESUME = False
# (MMN) Accepted so MMN's files load; unused for the same reason as RESUME.
_C.SOLVER.RESUME_EPOCH = 1
# (tan) Log (and append to metrics.jsonl) every this many iterations, besides
# the end of each epoch.
_C.SOLVER.LOG_PERIOD = 20
# (tan) Mixed precision for training and evaluation: "off" (float32), "bf16"
# (bfloat16 autocast) or "fp16" (float16 autocast with a gradient scaler).
# The loss, the scores and the optimizer state stay in float32.
_C.SOLVER.AMP = "off"
# (tan) Wrap the model in torch.compile (first iterations are slower while it compiles).
_C.SOLVER.COMPILE = False

# ---------------------------------------------------------------------------
# Test
# ---------------------------------------------------------------------------
_C.TEST = CN()
# Evaluation batch size over all processes: queries per step for TAN, videos
# (each with all its sentences) for MMN.
_C.TEST.BATCH_SIZE = 64
# Greedy NMS: drop a candidate whose temporal IoU with a kept one is above this.
_C.TEST.NMS_THRESH = 0.4
# (MMN) Test score of a cell: ((c + 1) / 2) ** CONTRASTIVE_SCORE_POW * s_iou,
# c its matching cosine and s_iou its IoU score (docs/mmn.md §5).
_C.TEST.CONTRASTIVE_SCORE_POW = 0.5
# (tan) What that IoU is measured on (docs/metric.md §2): "seconds" computes it
# on the candidates' float32 start and end seconds exactly as the reference
# implementation does, so R@5 matches the published figures; "clips" computes
# it on the cells' integer clip bounds, where a pair exactly at the threshold
# is never suppressed (in seconds, rounding decides). R@1 is the same for both.
_C.TEST.NMS_UNITS = "seconds"
# (tan) Metric that picks the best epoch on the validation datasets (the first
# of DATASETS.VAL, or of DATASETS.TEST when VAL is empty), saved as
# OUTPUT_DIR/model_best.pth: one of R@{1,5},IoU@{0.1,0.3,0.5,0.7} or mIoU.
_C.TEST.BEST_METRIC = "R@1,IoU@0.5"

# ---------------------------------------------------------------------------
# Distributed (tan)
# ---------------------------------------------------------------------------
_C.DISTRIBUTED = CN()
# Seconds a collective (gradient all-reduce, gather, barrier) may wait for the
# other processes before the run stops with an error instead of hanging.
_C.DISTRIBUTED.TIMEOUT = 1800

# ---------------------------------------------------------------------------
# Backends (tan)
# ---------------------------------------------------------------------------
# Let cuDNN time its convolution algorithms on the first batches and keep the
# fastest (input shapes are fixed, so this pays off after a few steps).
_C.CUDNN_BENCHMARK = True
# Let float32 convolutions and matrix products use TF32 on GPUs that have it
# (the reference's default for convolutions); False computes in full float32.
_C.TF32 = True

# ---------------------------------------------------------------------------
# Misc
# ---------------------------------------------------------------------------
# Folder for logs, config.yml, metrics, checkpoints and results.
_C.OUTPUT_DIR = "outputs/default"
# (tan) Write training and validation scalars for TensorBoard to
# OUTPUT_DIR/tensorboard (needs the tensorboard package).
_C.TENSORBOARD = False
# (tan) Seed of Python, NumPy and torch random generators (model init, shuffle).
_C.SEED = 0
