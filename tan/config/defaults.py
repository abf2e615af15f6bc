"""Default configuration of the core. Every key is documented; each registered
model adds its own settings under MODEL.{NAME} from its package (docs/models.md
§2). YAML files and command-line ``KEY VALUE`` pairs may only override keys
that exist.

Keys and defaults follow the reference re-implementation so that its YAML
files load unchanged; additions are marked "(tan)".
"""
from yacs.config import CfgNode as CN

_C = CN()

# (tan) Plug-ins to import before the rest of the config is read: Python
# module names, or paths of a .py file or a package folder (from the current
# directory). A plug-in registers models, annotation formats or text inputs
# (docs/models.md, docs/data.md §11), trainers, optimizers or schedules
# (docs/training.md).
_C.PLUGINS = []
# (tan) The trainer that runs tan-train: "default", or the name a plug-in
# registers a subclass of tan.engine.Trainer under (docs/training.md).
_C.TRAINER = "default"

# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------
_C.MODEL = CN()
# Where the model runs: "auto" (CUDA when present, else CPU), "cpu", "cuda"
# or "cuda:N". Asking for CUDA on a machine without it is an error.
_C.MODEL.DEVICE = "auto"
# Name of the model, one of those registered (docs/models.md): the built-in
# models or a plug-in's. Its settings are MODEL.{ARCHITECTURE}.
# A config that does not set it gets the built-in plug-in's default model.
_C.MODEL.ARCHITECTURE = ""
# Path of initial weights (model weights only) used when OUTPUT_DIR holds no
# checkpoint to resume from. Empty: start from random initialisation.
_C.MODEL.WEIGHT = ""
# (tan) Keep the 2D maps in channels-last memory layout, which tensor-core
# convolutions prefer on GPUs; results are the same.
_C.MODEL.CHANNELS_LAST = False
# (tan) A window relevance head beside any model (docs/long_videos.md): a cheap
# score of how well a window of a long video matches a sentence (the best
# match of the window's rows with the sentence, in a learned space), trained
# to rank the windows of a video against each other
# (INPUT.TRAIN_WINDOW.RANKED_WINDOWS), so that grounding scores only the top
# TEST.WINDOW.TOP_K windows with the full model.
_C.MODEL.RELEVANCE = CN()
# True: the model carries the head (in its checkpoints), trained beside it.
_C.MODEL.RELEVANCE.ENABLED = False
# Width of the space the rows and the sentence are projected to.
_C.MODEL.RELEVANCE.HIDDEN_SIZE = 128
# Temperature of the softmax over a video's windows (training and grounding).
_C.MODEL.RELEVANCE.TEMPERATURE = 0.1
# Weight of its ranking loss beside the model's own loss.
_C.MODEL.RELEVANCE.LOSS_WEIGHT = 1.0
# (tan) A listwise loss on the model's own scores across the windows of a video
# (INPUT.TRAIN_WINDOW.RANKED_WINDOWS): a window's score is its best cell's, and
# the window holding the moment is ranked above the others of its video.
_C.MODEL.WINDOW_RANKING = CN()
# Its weight beside the model's own loss; 0: off.
_C.MODEL.WINDOW_RANKING.LOSS_WEIGHT = 0.0
# Temperature of its softmax over the windows' best scores.
_C.MODEL.WINDOW_RANKING.TEMPERATURE = 0.1
# Windows without the moment that the full model scores per query for it,
# each a map's cost: the nearest on either side first, then those drawn.
_C.MODEL.WINDOW_RANKING.WINDOWS = 2

# ---------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------
_C.INPUT = CN()
# P: rows each video's features are resampled to before the feature pooling.
_C.INPUT.NUM_PRE_CLIPS = 256
# E: dimension of the word vectors (300 for GloVe's), or of the precomputed
# sentence features (512 for CLIP's token features) with SENTENCE_FEATURES.
_C.INPUT.PRE_QUERY_SIZE = 300
# (tan) True: sentences enter as precomputed token features, one file per query
# in the folder named by each dataset's catalog field "text_features" (e.g.
# lighthouse's CLIP "last_hidden_state"), and no word-vector file is read;
# for models whose sentence encoder reads vectors. docs/data.md §9.3.
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
# (tan) Training on long videos by windows (docs/long_videos.md).
_C.INPUT.TRAIN_WINDOW = CN()
# Seconds: a training item of a long video is a window of this length holding
# the query's moment, drawn from SEED, the epoch and the query, and taken as
# the model takes a video. 0: every video whole. Models that train on windows
# of their own clips (a clip input of variable length) refuse it.
_C.INPUT.TRAIN_WINDOW.LENGTH = 0.0
# Only videos longer than this (seconds) are windowed; 0: LENGTH.
_C.INPUT.TRAIN_WINDOW.LONGER_THAN = 0.0
# The share of the windows drawn away from the moment (no cell holds it), so
# that the scores of windows without the moment are learnt low. Refused by
# models trained on batches of videos, whose loss needs the moment.
_C.INPUT.TRAIN_WINDOW.NEGATIVES = 0.0
# Windows of the same video (on a grid of LENGTH every LENGTH / 2 seconds)
# that each training query is ranked against besides one holding its moment:
# the nearest without the moment on either side, the others drawn from the
# whole video. They feed MODEL.RELEVANCE's loss and MODEL.WINDOW_RANKING's; a
# video's windows are encoded once per batch, for all its queries. Needs LENGTH,
# except for a model that trains on windows of its own rows (a clip input of
# variable length), whose windows are ranked on a grid of that many rows.
# 0: none.
_C.INPUT.TRAIN_WINDOW.RANKED_WINDOWS = 0

# ---------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------
_C.DATASETS = CN()
# (tan) Folder that relative dataset and word-vector paths are taken from.
_C.DATASETS.ROOT = "datasets"
# (tan) Optional YAML or JSON file registering more datasets by name (see
# docs/datasets.md, "Registering a dataset"). A relative path is taken from ROOT.
_C.DATASETS.CATALOG = ""
# (tan) Folder for caches of prepared data (the word vectors the datasets use),
# relative to ROOT; OUTPUT_DIR/cache when it cannot be written.
_C.DATASETS.CACHE_DIR = "cache"
# The benchmark's name ("tacos", "activitynet", "charades"), as some reference
# codes set it to pick the IoU columns of their table. tan reports every
# threshold, so here it only labels the run.
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
# (tan) For models trained on batches of videos: at most this many of a
# video's sentences per training item, drawn anew each epoch; 0 takes them all
# (the reference habit). Evaluation always takes them all.
_C.DATALOADER.SENTENCES_PER_VIDEO = 0

# ---------------------------------------------------------------------------
# Solver
# ---------------------------------------------------------------------------
_C.SOLVER = CN()
# Number of training epochs (epochs are counted from 1).
_C.SOLVER.MAX_EPOCH = 12
# Learning rate (each parameter group's lr_scale times this).
_C.SOLVER.LR = 0.01
# Save model_{epoch}e.pth every this many epochs (0: only model_final.pth).
_C.SOLVER.CHECKPOINT_PERIOD = 1
# Evaluate on the validation datasets every this many epochs (0: never).
_C.SOLVER.TEST_PERIOD = 1
# Training batch size over all processes: queries per optimisation step, or
# videos (each with its sentences) for models trained on batches of videos.
_C.SOLVER.BATCH_SIZE = 32
# (tan) End each epoch after this many iterations (0: a full pass over the
# training data). For quick experiments on large datasets.
_C.SOLVER.ITERS_PER_EPOCH = 0
# (tan) The optimizer: "adam", "adamw", "sgd" (with SOLVER.MOMENTUM) or one a
# plug-in registers; "" takes the one the model's recipe names, as its
# reference trains it. Betas and weight decay are the recipe's too.
_C.SOLVER.OPTIMIZER = ""
# (tan) SGD's momentum.
_C.SOLVER.MOMENTUM = 0.9
# (tan) The learning-rate schedule, stepped once per epoch: "multistep"
# (times SOLVER.GAMMA after each of SOLVER.MILESTONES) or "cosine" (half a
# cosine from SOLVER.LR towards SOLVER.LR x SOLVER.END_LR_FACTOR after
# SOLVER.MAX_EPOCH epochs), or one a plug-in registers.
_C.SOLVER.SCHEDULER = "multistep"
# Epochs after which the learning rate is multiplied by SOLVER.GAMMA ("multistep").
_C.SOLVER.MILESTONES = (8, 11)
# (tan) The factor of each milestone.
_C.SOLVER.GAMMA = 0.1
# (tan) "cosine": the rate it heads for, as a fraction of SOLVER.LR.
_C.SOLVER.END_LR_FACTOR = 0.0
# (tan) Linear warm-up: the first this many steps (0: none) train at the
# schedule's rate times a factor rising from SOLVER.WARMUP_FACTOR to 1.
_C.SOLVER.WARMUP_ITERS = 0
# (tan) The warm-up's factor at the first step.
_C.SOLVER.WARMUP_FACTOR = 0.001
# Periodic evaluation starts at this epoch (0 or 1: from the first).
_C.SOLVER.SKIP_TEST = 0
# Accepted so that reference codes' files load. tan always resumes from OUTPUT_DIR's
# latest checkpoint, exactly and mid-epoch, so it is not needed.
_C.SOLVER.RESUME = False
# Accepted so that reference codes' files load; unused for the same reason as RESUME.
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
# Evaluation batch size over all processes: queries per step, or videos (each
# with all its sentences) for models trained on batches of videos.
_C.TEST.BATCH_SIZE = 64
# Greedy NMS: drop a candidate whose temporal IoU with a kept one is above this.
_C.TEST.NMS_THRESH = 0.4
# (tan) What that IoU is measured on (docs/metric.md §2): "seconds" computes it
# on the candidates' float32 start and end seconds exactly as the reference
# implementation does, so R@5 matches the published figures; "clips" computes
# it on the cells' integer clip bounds, where a pair exactly at the threshold
# is never suppressed (in seconds, rounding decides). R@1 is the same for both.
_C.TEST.NMS_UNITS = "seconds"
# (tan) Metric that picks the best epoch on the validation datasets (the first
# of DATASETS.VAL, or of DATASETS.TEST when VAL is empty), saved as
# OUTPUT_DIR/model_best.pth: one of R@{1,5},IoU@{0.1,0.3,0.5,0.7} or mIoU, or
# with Moment-DETR's metrics on, one of theirs (MR-full-mAP, MR-full-R1@0.7, ...).
_C.TEST.BEST_METRIC = "R@1,IoU@0.5"
# (tan) Moment-DETR's metrics (docs/metric.md §6): R1@0.5/0.7, mAP at 0.5, 0.75
# and over 0.5:0.05:0.95, mAP by moment length, and HD mAP / HIT@1 where the
# annotations have saliency scores; each dataset's results folder also gets a
# submission file in their format. "auto": for datasets with JSON-lines
# annotations; "on": for every dataset; "off": never.
_C.TEST.DETR_METRICS = "auto"
# (tan) More evaluators for every test dataset, by name (docs/metric.md §7): each
# reports figures of its own beside those the dataset's annotation format
# brings (Ego4D NLQ's, MAD's, Moment-DETR's for JSON lines) and may write a
# file of its own (a submission). A plug-in (PLUGINS) registers its own.
_C.TEST.EVALUATORS = []
# (tan) Windowed grounding of videos longer than those the model was trained
# on (docs/long_videos.md), in tan-predict, the API and the demo: such a video
# is cut into overlapping windows, each taken as a training video is, and the
# windows' moments merged by one NMS over the video. A training run records the
# training videos' median and longest durations in its checkpoints.
_C.TEST.WINDOW = CN()
# False: every video is scored whole, resampled to the model's clips.
_C.TEST.WINDOW.ENABLED = True
# False: tan-test and the periodic evaluation score every video whole, as a
# reference evaluates (the configs that reproduce a reference's table);
# tan-predict, the API and the demo still window long videos.
_C.TEST.WINDOW.IN_EVALUATION = True
# Seconds per window; 0: as trained (the training videos' median duration).
_C.TEST.WINDOW.LENGTH = 0.0
# Seconds from one window's start to the next; 0: half of the length.
_C.TEST.WINDOW.STRIDE = 0.0
# Window only videos longer than this (seconds); 0: the longest training video
# (or the window length when the checkpoint records none).
_C.TEST.WINDOW.LONGER_THAN = 0.0
# Windows encoded per forward: what bounds the memory, whatever the video's length.
_C.TEST.WINDOW.BATCH = 8
# Best moments of each window (after NMS within it) that enter the merge; 0:
# every candidate of every window enters one NMS over the video, with no NMS
# within a window (as a benchmark's own evaluation may do: docs/long_videos.md).
_C.TEST.WINDOW.CANDIDATES = 20
# True: the last window ends at the video's end, so every second is in one.
# False: windows every STRIDE from the start while a whole window ends before
# the video's last row, none after (its last seconds, up to a stride, are in
# no window).
_C.TEST.WINDOW.COVER_END = True
# Feature rows a second of the video, where the features have a fixed rate:
# windows and their moments are laid on the rows' own clock, row r at r / rate
# seconds, whatever the annotated duration. 0: a video's rows span
# its annotated duration (row r at r x duration / rows).
_C.TEST.WINDOW.ROWS_PER_SECOND = 0.0
# Which windows of a long video a sentence is grounded in (docs/long_videos.md):
# "auto": the learned relevance head when the checkpoint has one
# (MODEL.RELEVANCE.ENABLED), else every window; "learned": that head (refused
# without one); "pooled": the cosine of the sentence's mean vector with the
# window's best row (no parameters; the features and the sentence vectors
# must share a space and a width); "none": every window.
_C.TEST.WINDOW.RELEVANCE = "auto"
# With a relevance stage: the windows per sentence that the full model scores.
_C.TEST.WINDOW.TOP_K = 10
# With a relevance stage, a moment's final score: "product" (its score times
# its window's relevance, a softmax over the video's windows) or "sum" (the
# two, each min-max normalised over the sentence's kept moments, added).
_C.TEST.WINDOW.SCORE = "product"
# True: each sentence's moment scores are min-max normalised over the moments
# its windows kept, before the merge.
_C.TEST.WINDOW.NORMALIZE = False

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
# On the CPU (Linux, glibc), keep memory that tensors free for the next training
# step instead of handing it back to the system and faulting it in again
# (tan/engine/cpu_allocator.py): faster steps; the resident memory stays at a
# step's peak between steps.
_C.CPU_KEEP_FREED_MEMORY = True

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
