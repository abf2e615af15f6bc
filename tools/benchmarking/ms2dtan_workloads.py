"""MS-2D-TAN's timed workloads (MODEL.ARCHITECTURE "MS_TAN"): training steps,
inference (scores and the top 5 after NMS) and the evaluation's arithmetic,
ours and the baseline computed MS-2D-TAN's way (reference_ms2dtan.py, which
loads our model's state dict as it is).

Batches are of queries, each with its own video, as MS-2D-TAN's are: videos
of different lengths (``LENGTHS`` times the window), training items windows
of MODEL.MS_TAN.NUM_CLIPS rows at a random start (a shorter video padded),
test items whole videos, a batch sorted longest first as its test loader
sorts them. Both sides read the same raw videos, each through its own data
path (tan's clip input and BatchCollator; its sliding_window_item /
sampling_item and collate with their IoU targets), prepared before any timing.
Data loading is shared with the other models (workloads.py)."""
import time

import numpy as np
import torch
from torch.nn import functional as F

from tan.config.models import model_class
from tan.data.collate import BatchCollator
from tan.evaluation import IOU_THRESHOLDS, RECALL_AT, evaluate_moments, top_candidates
from tan.engine.precision import autocast
from tan.engine.step import forward_batch, move_batch
from tan.engine.wrappers import maybe_compile
from tan.modeling import build_model
from tan.modeling.ms2dtan.config import anchor_counts
from tan.modeling.ms2dtan.model import MultiScaleOutput
from tan.modeling.ms2dtan.proposals import MultiScaleProposals

from oracles import reference_ms2dtan as ref
from .workloads import WORDS, build_ours, our_train_step, sync

# Video lengths, in windows (MODEL.MS_TAN.NUM_CLIPS rows): from half a window (padded)
# to twice one (a random window in training, the whole video in evaluation).
LENGTHS = (0.5, 2.0)

NOTES = (
    "train: the model step only (forward, loss, backward, Adam); both collates, the reference's per-scale IoU "
    "targets included, are prepared before timing. The reference re-encodes the sentence with its LSTM for "
    "every scale; ours encodes it once.",
    "inference: forward on whole videos (batch sorted longest first) and the top 5 after NMS: ours "
    "model.candidates + top_candidates (batched, on the device); the reference recover_to_single_map + "
    "sliding_window_proposals (top-k over every cell on the CPU, numpy NMS per query); its test loss is left out.",
    "evaluation: random per-scale scores of whole videos -> top 5 -> R@k table (its evaluate / our "
    "evaluate_moments), in test batches; no model.",
    "the baseline on CUDA: float32, cuDNN autotuning on (MS-2D-TAN's experiment files set CUDNN.BENCHMARK).",
)


def describe(cfg):
    """One line of the model's shape for the report."""
    ms = cfg.MODEL.MS_TAN
    maps = ms.MAP_MODULE
    kernels = "/".join(str(k) for k in maps.KERNEL_SIZES)
    window = (f"windows of {ms.NUM_CLIPS} rows of {ms.TIME_UNIT:g} s" if ms.SLIDING_WINDOW
              else f"{ms.NUM_CLIPS} sampled rows")
    return (f"{window}, clip stride {ms.CLIP_MODULE.STRIDE}, scales {list(ms.PROP_MODULE.NUM_LAYERS)} "
            f"(prop {ms.PROP_MODULE.NAME}), hidden {ms.CLIP_MODULE.HIDDEN_SIZE}, {maps.NAME} map convs "
            f"{list(maps.HIDDEN_SIZES)} k {kernels}, LSTM {ms.FUSION_MODULE.TXT_NUM_LAYERS} x "
            f"{ms.FUSION_MODULE.TXT_HIDDEN_SIZE}")


def reference_model(cfg):
    """ReferenceMS2DTAN with the settings of ``cfg``."""
    ms = cfg.MODEL.MS_TAN
    return ref.ReferenceMS2DTAN(
        input_size=ms.CLIP_MODULE.INPUT_SIZE, hidden_size=ms.CLIP_MODULE.HIDDEN_SIZE,
        num_layers=list(ms.PROP_MODULE.NUM_LAYERS), txt_input_size=cfg.INPUT.PRE_QUERY_SIZE,
        txt_hidden_size=ms.FUSION_MODULE.TXT_HIDDEN_SIZE, txt_layers=ms.FUSION_MODULE.TXT_NUM_LAYERS,
        txt_bidirectional=ms.FUSION_MODULE.TXT_BIDIRECTIONAL, map_hidden_sizes=list(ms.MAP_MODULE.HIDDEN_SIZES),
        map_kernel_sizes=list(ms.MAP_MODULE.KERNEL_SIZES), map_paddings=list(ms.MAP_MODULE.PADDINGS),
        clip_kernel=ms.CLIP_MODULE.KERNEL_SIZE, clip_stride=ms.CLIP_MODULE.STRIDE,
        prop={"conv": "MultiScalePropConvTanhBN", "pool": "MultiScalePropMaxPool"}[ms.PROP_MODULE.NAME],
        map={"gated": "MapGatedConv", "conv": "Conv"}[ms.MAP_MODULE.NAME])


def build(cfg, impl, device):
    """Our model, seeded as a run builds it; the reference with the same weights."""
    ours = build_ours(cfg, device)
    if impl != "reference":
        return ours
    reference = reference_model(cfg).to(device)
    reference.load_state_dict(ours.state_dict())  # its parameter names: loads as it is
    return reference


# ------------------------------------------------------------------ batches

class WindowStart:
    """A generator stand-in for tan's clip input: the window start drawn beforehand."""

    def __init__(self, start):
        self.start = start

    def integers(self, high):
        assert 0 <= self.start < high, (self.start, high)
        return self.start


def video_lengths(cfg, count, rng):
    n = cfg.MODEL.MS_TAN.NUM_CLIPS
    return rng.integers(int(LENGTHS[0] * n), int(LENGTHS[1] * n) + 1, size=count)


def random_videos(cfg, lengths, rng):
    """Raw items (features [T, D_in], (start, end) seconds, duration, word vectors [L, E]) of
    videos of ``lengths`` rows (TIME_UNIT s each), a moment of 5-30 % of each video."""
    ms = cfg.MODEL.MS_TAN
    items = []
    for length in lengths:
        duration = float(length) * (ms.TIME_UNIT if ms.SLIDING_WINDOW else 1.0)
        start = float(rng.uniform(0, 0.7)) * duration
        end = min(duration, start + float(rng.uniform(0.05, 0.3)) * duration)
        feats = torch.from_numpy(rng.random((int(length), ms.CLIP_MODULE.INPUT_SIZE), dtype=np.float32))
        words = torch.from_numpy(rng.standard_normal((int(rng.integers(WORDS // 2, WORDS + 1)),
                                                     cfg.INPUT.PRE_QUERY_SIZE), dtype=np.float32))
        items.append((feats, (start, end), duration, words))
    return items


def our_collated(cfg, items, starts=None):
    """Items through tan's clip input and BatchCollator (``starts``: training windows)."""
    clips = model_class(cfg).clip_input(cfg)
    batch = []
    for k, (feats, (s, e), duration, words) in enumerate(items):
        rng = None if starts is None else WindowStart(starts[k])
        rows, offset, count = clips.take(clips.base(feats.numpy()), rng)
        item = {"feats": torch.as_tensor(rows), "query": words, "moment": torch.tensor([s, e]),
                "gt_moments": torch.tensor([[s, e]]), "duration": duration, "index": k}
        if clips.variable_length:
            item.update(clip_count=count, clip_offset=offset)
        batch.append(item)
    return BatchCollator()(batch)


def scale_sizes(cfg):
    """(OUTPUT_NUM_CLIPS, NUM_ANCHORS) of the reference's DATASET section."""
    ms = cfg.MODEL.MS_TAN
    layers = list(ms.PROP_MODULE.NUM_LAYERS)
    return [ms.NUM_CLIPS // ms.CLIP_MODULE.STRIDE // 2 ** s for s in range(len(layers))], anchor_counts(layers)


def reference_collated(cfg, items, train, starts=None):
    """Items through the reference's item functions and collate (its IoU targets included)."""
    ms = cfg.MODEL.MS_TAN
    outs, anchors = scale_sizes(cfg)
    prepared = []
    for k, (feats, gt, duration, words) in enumerate(items):
        if ms.SLIDING_WINDOW:
            f, m, maps = ref.sliding_window_item(feats, gt, duration, ms.TIME_UNIT, ms.NUM_CLIPS, outs, anchors, train,
                                                 window_start=starts[k] if starts else 0, normalize=ms.NORMALIZE)
        else:
            f, m, maps = ref.sampling_item(feats, gt, duration, ms.NUM_CLIPS, outs, anchors, normalize=ms.NORMALIZE)
        prepared.append((words, torch.ones(len(words), 1), f, m, maps))
    return ref.collate(prepared)


def _pinned(value, pin):
    if isinstance(value, torch.Tensor):
        return value.pin_memory() if pin else value
    if isinstance(value, dict):
        return {k: _pinned(v, pin) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_pinned(v, pin) for v in value)
    return value


def random_batches(cfg, batch, device, seed=0):
    """{"train": {"ours": collated, "reference": its collate}, "test": {...}} of ``batch``
    queries: training windows, and whole videos sorted longest first."""
    ms = cfg.MODEL.MS_TAN
    rng = np.random.default_rng(seed)
    lengths = video_lengths(cfg, batch, rng)
    items = random_videos(cfg, lengths, rng)
    starts = None
    if ms.SLIDING_WINDOW:  # as the reference draws them: never the last start
        starts = [int(rng.integers(t - ms.NUM_CLIPS)) if t > ms.NUM_CLIPS else 0 for t in lengths]
    test = random_videos(cfg, sorted(video_lengths(cfg, batch, rng), reverse=True), rng)
    out = {"train": {"ours": our_collated(cfg, items, starts if ms.SLIDING_WINDOW else None),
                     "reference": reference_collated(cfg, items, True, starts)},
           "test": {"ours": our_collated(cfg, test), "reference": reference_collated(cfg, test, False),
                    "durations": [it[2] for it in test]}}
    return _pinned(out, device.type == "cuda")


# ----------------------------------------------------------------- the steps

def train_step_fn(cfg, impl, model, batches, device):
    """One optimisation step: ours as the trainer does it (tan.engine.step.run_step), the
    reference's as run.py does it (Adam, the summed per-scale rescaled BCE)."""
    if impl != "reference":
        return our_train_step(cfg, model, batches["train"]["ours"], device)
    words, txt_mask, feats, vis_mask, targets = batches["train"]["reference"]
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.SOLVER.LR)
    loss = cfg.MODEL.MS_TAN.LOSS
    model.train()

    def step():
        predictions, masks = model(*(t.to(device, non_blocking=True) for t in (words, txt_mask, feats, vis_mask)))
        total = ref.total_loss(predictions, masks, [t.to(device, non_blocking=True) for t in targets],
                               loss.MIN_IOU, loss.MAX_IOU, loss.BIAS)
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
    return step


def proposal_unit(cfg):
    ms = cfg.MODEL.MS_TAN
    return ref.proposal_time_unit(ms.TIME_UNIT, ms.NUM_CLIPS, scale_sizes(cfg)[0])


def reference_proposals(cfg, predictions, masks, durations):
    """The reference's top 5 of each query (lists of [start, end]) from its model's output."""
    joined, joined_mask = ref.recover_to_single_map(predictions), ref.recover_to_single_map(masks)
    if cfg.MODEL.MS_TAN.SLIDING_WINDOW:
        return ref.sliding_window_proposals(joined, joined_mask, proposal_unit(cfg), cfg.TEST.NMS_THRESH)
    return ref.duration_proposals(joined, joined_mask, durations, cfg.TEST.NMS_THRESH)


def inference_step_fn(cfg, impl, model, batches, device):
    """Scores of a test batch and its top 5 after NMS, as each evaluation computes them."""
    model.eval()
    if impl == "reference":
        words, txt_mask, feats, vis_mask, _ = batches["test"]["reference"]
        durations = batches["test"]["durations"]

        @torch.no_grad()
        def step():
            predictions, masks = model(*(t.to(device, non_blocking=True) for t in (words, txt_mask, feats, vis_mask)))
            reference_proposals(cfg, predictions, masks, durations)
        return step
    batch = batches["test"]["ours"]
    forward = maybe_compile(cfg, model)

    @torch.no_grad()
    def step():
        moved = move_batch(batch, device)
        with autocast(cfg.SOLVER.AMP, device):
            output = forward_batch(forward, moved)
        kept = top_candidates(model.candidates(output, moved["durations"]), cfg.TEST.NMS_THRESH,
                              units=cfg.TEST.NMS_UNITS)
        for t in kept:  # copied back once per batch, as the evaluation does
            t.cpu()
    return step


# ------------------------------------------------------------ the evaluation

def random_outputs(cfg, lengths, gen):
    """A model's output (MultiScaleOutput) for whole videos of ``lengths`` rows: random
    logits on the valid cells (the cells as the model derives them from the real rows)."""
    ms = cfg.MODEL.MS_TAN
    if not ms.SLIDING_WINDOW:  # NUM_CLIPS rows sampled from every video
        lengths = [ms.NUM_CLIPS] * len(lengths)
    rows = max(max(lengths), ms.NUM_CLIPS)  # a shorter video is padded to the window
    counts = torch.as_tensor(lengths)
    real = (torch.arange(rows)[None, :] < counts[:, None]).float()[:, None, :]
    real = (F.avg_pool1d(real, ms.CLIP_MODULE.KERNEL_SIZE, ms.CLIP_MODULE.STRIDE) == 1).float()
    chains = MultiScaleProposals("pool", 1, list(ms.PROP_MODULE.NUM_LAYERS))
    _, masks = chains(torch.zeros_like(real), real)
    logits = [torch.randn(m[:, 0].shape, generator=gen) * 2 * m[:, 0] for m in masks]
    return MultiScaleOutput(logits, [m[:, 0] for m in masks])


def time_evaluation(cfg, impl, num_queries, device, batch_size=None, seed=0):
    """Seconds per query from the model's per-scale outputs (whole videos, test batches
    longest first) to the R@k table, the NMS included; returns (seconds, table)."""
    ms = cfg.MODEL.MS_TAN
    batch_size = batch_size or cfg.TEST.BATCH_SIZE
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    lengths = sorted(video_lengths(cfg, num_queries, rng).tolist(), reverse=True)
    unit = ms.TIME_UNIT if ms.SLIDING_WINDOW else 1.0
    durations = torch.tensor(lengths, dtype=torch.float32) * unit
    gt = torch.rand(num_queries, 2, generator=gen).sort(dim=1).values * durations[:, None]
    batches = [(random_outputs(cfg, lengths[i:i + batch_size], gen), durations[i:i + batch_size])
               for i in range(0, num_queries, batch_size)]
    if impl == "reference":
        batches = [([(torch.sigmoid(z) * m)[:, None].to(device) for z, m in zip(out.logits, out.masks)],
                    [m[:, None].to(device) for m in out.masks], d.tolist()) for out, d in batches]
        sync(device)
        start = time.perf_counter()
        segments = [s for scores, masks, d in batches for s in reference_proposals(cfg, scores, masks, d)]
        table = ref.evaluate(segments, gt.tolist(), IOU_THRESHOLDS, RECALL_AT)
        return (time.perf_counter() - start) / num_queries, table
    with torch.device("meta"):
        core = build_model(cfg)  # candidates() reads the settings only, no weights
    batches = [(MultiScaleOutput([z.to(device) for z in out.logits], [m.to(device) for m in out.masks]), d.to(device))
               for out, d in batches]
    top_candidates(core.candidates(*batches[0]), cfg.TEST.NMS_THRESH, units=cfg.TEST.NMS_UNITS)  # warm-up
    sync(device)
    start = time.perf_counter()
    kept, filled = [], []
    for output, d in batches:
        moments, _, has = top_candidates(core.candidates(output, d), cfg.TEST.NMS_THRESH, units=cfg.TEST.NMS_UNITS)
        kept.append(moments.cpu())
        filled.append(has.cpu())
    table = evaluate_moments(torch.cat(kept), torch.cat(filled), gt)
    return (time.perf_counter() - start) / num_queries, table
