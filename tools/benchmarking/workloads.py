"""Timed workloads on random inputs of a config's real shapes: training
steps, inference, the predictor alone, evaluation and data loading."""
import resource
import time

import torch

from tan.config.architecture import model_settings
from tan.config.models import model_class
from tan.evaluation import evaluate_moments, top_moments
from tan.engine.precision import autocast, make_grad_scaler
from tan.engine.step import forward_batch, move_batch, run_step
from tan.engine.wrappers import maybe_compile, prepare_model
from tan.modeling import build_model
from tan.modeling.map2d.feat2d import build_mask2d
from tan.modeling.map2d.strips import build_weight_maps
from tan.modeling.tan2d.predictor import ProposalConv
from tan.solver import build_optimizer

from oracles.reference_2dtan import ReferenceTAN, reference_evaluate, stored_iou2d

WORDS = 12  # words per sentence of the random queries (TACoS averages about 10)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device):
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_gb(device):
    """Peak GPU memory allocated since the last reset; on CPU the process's peak RSS so far."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def random_batch(cfg, batch, device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    feats = torch.randn(batch, cfg.INPUT.NUM_PRE_CLIPS, cfg.MODEL.TAN.FEATPOOL.INPUT_SIZE, generator=gen).abs()
    queries = torch.randn(batch, WORDS, cfg.INPUT.PRE_QUERY_SIZE, generator=gen)
    wordlens = torch.randint(WORDS // 2, WORDS + 1, (batch,), generator=gen)
    durations = torch.rand(batch, generator=gen) * 100 + 20
    starts = torch.rand(batch, generator=gen) * 0.7 * durations
    moments = torch.stack([starts, starts + (0.05 + 0.25 * torch.rand(batch, generator=gen)) * durations], dim=1)
    pin = device.type == "cuda"
    return {k: (v.pin_memory() if pin else v) for k, v in dict(
        feats=feats, queries=queries, wordlens=wordlens, durations=durations, moments=moments,
        gt_moments=moments[:, None, :]).items()}


def predictor_flops(cfg):
    """(dense, computed) forward FLOPs per sample of the predictor's K x K convs,
    each counted at its real output size; ``computed`` is what the strip plan covers."""
    tan = cfg.MODEL.TAN
    k, s = tan.PREDICTOR.KERNEL_SIZE, tan.PREDICTOR.NUM_STACK_LAYERS
    mask = build_mask2d(tan.NUM_CLIPS, tan.FEAT2D.POOLING_COUNTS)
    per_cell = [2 * c_in * tan.PREDICTOR.HIDDEN_SIZE * k * k
                for c_in in [tan.FEATPOOL.HIDDEN_SIZE] + [tan.PREDICTOR.HIDDEN_SIZE] * (s - 1)]
    dense = sum(f * m.numel() for f, m in zip(per_cell, build_weight_maps(mask, k, s)))
    if not tan.PREDICTOR.STRIP_ROWS:
        return dense, dense
    plans = ProposalConv(1, 1, k, s, mask, tan.PREDICTOR.STRIP_ROWS).plans
    computed = sum(f * sum((r1 - r0) * (c1 - c0) for r0, r1, c0, c1 in plan) for f, plan in zip(per_cell, plans))
    return dense, computed


class Timer:
    """Runs ``step`` ``warmup`` times, then times ``steps`` runs (device synchronised at both ends)."""

    def __init__(self, device, warmup, steps):
        self.device, self.warmup, self.steps = device, warmup, steps

    def __call__(self, step):
        for _ in range(self.warmup):
            step()
        sync(self.device)
        reset_peak(self.device)
        start = time.perf_counter()
        for _ in range(self.steps):
            step()
        sync(self.device)
        return (time.perf_counter() - start) / self.steps


def build_ours(cfg, device):
    """Our model of ``cfg`` (2D-TAN or MMN), seeded, as a run prepares it."""
    torch.manual_seed(cfg.SEED)
    return prepare_model(cfg, build_model(cfg).to(device))


def our_train_step(cfg, model, batch, device):
    """One optimisation step as the trainer does it, for any model."""
    optimizer = build_optimizer(cfg, model, model.recipe(cfg))
    scaler = make_grad_scaler(cfg.SOLVER.AMP, device)
    forward = maybe_compile(cfg, model)
    clip = model_class(cfg).recipe(cfg).clip_grad_norm

    def step():
        run_step(forward, batch, optimizer, scaler, cfg.SOLVER.AMP, device, clip)
    return step


def our_inference_step(cfg, model, batch, device):
    """The test scores of a batch as the evaluation computes them, for any model."""
    model.eval()
    forward = maybe_compile(cfg, model)

    @torch.no_grad()
    def step():
        moved = move_batch(batch, device)
        with autocast(cfg.SOLVER.AMP, device):
            output = forward_batch(forward, moved)
        model.scores(output)
    return step


def build(cfg, impl, device):
    if impl == "reference":
        torch.manual_seed(cfg.SEED)
        return ReferenceTAN(cfg).to(device)
    return build_ours(cfg, device)


def train_step_fn(cfg, impl, model, batch, device):
    """One optimisation step as the trainer does it (reference: as the reference does it)."""
    if impl == "reference":
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.SOLVER.LR)
        # the reference's loader delivers an N x N IoU map per query, copied to the device each step
        iou_maps = stored_iou2d(batch["moments"], batch["durations"], cfg.MODEL.TAN.NUM_CLIPS)

        def step():
            logits = model(batch["feats"].to(device, non_blocking=True),
                           batch["queries"].to(device, non_blocking=True), batch["wordlens"])
            loss = model.loss(logits, iou_maps.to(device, non_blocking=True))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return step
    return our_train_step(cfg, model, batch, device)


def inference_step_fn(cfg, impl, model, batch, device):
    if impl != "reference":
        return our_inference_step(cfg, model, batch, device)
    model.eval()

    @torch.no_grad()
    def step():
        logits = model(batch["feats"].to(device, non_blocking=True), batch["queries"].to(device, non_blocking=True),
                       batch["wordlens"])
        model.scores(logits)
    return step


def predictor_step_fn(cfg, impl, model, batch_size, device):
    """Forward and backward of the predictor alone on a random fused map."""
    tan = cfg.MODEL.TAN
    n = tan.NUM_CLIPS
    x = torch.randn(batch_size, tan.FEATPOOL.HIDDEN_SIZE, n, n, device=device) * model.mask2d
    if impl != "reference" and cfg.MODEL.CHANNELS_LAST:
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_(True)
    amp = "off" if impl == "reference" else cfg.SOLVER.AMP
    predictor = model.predictor

    def step():
        with autocast(amp, device):
            out = predictor(x)
        out.float().sum().backward()
    return step


def time_evaluation(cfg, impl, num_queries, device, batch_size=None, seed=0):
    """Seconds per query to turn score maps (of the model's map) into the metrics (NMS included)."""
    arch = model_settings(cfg)
    n = arch.NUM_CLIPS
    gen = torch.Generator().manual_seed(seed)
    mask = build_mask2d(n, arch.FEAT2D.POOLING_COUNTS)
    scores = torch.rand(num_queries, n, n, generator=gen) * mask
    durations = torch.rand(num_queries, generator=gen) * 100 + 20
    gt = torch.rand(num_queries, 2, generator=gen).sort(dim=1).values * durations[:, None]
    if impl == "reference":
        start = time.perf_counter()
        reference_evaluate(scores, durations, gt, cfg.TEST.NMS_THRESH)
        return (time.perf_counter() - start) / num_queries, None
    batch_size = batch_size or cfg.TEST.BATCH_SIZE
    scores, durations, mask = scores.to(device), durations.to(device), mask.to(device)
    top_moments(scores[:batch_size], durations[:batch_size], cfg.TEST.NMS_THRESH, mask2d=mask,
                units=cfg.TEST.NMS_UNITS)  # warm-up
    sync(device)
    start = time.perf_counter()
    kept, filled = [], []
    for i in range(0, num_queries, batch_size):
        moments, _, has = top_moments(scores[i:i + batch_size], durations[i:i + batch_size], cfg.TEST.NMS_THRESH,
                                      mask2d=mask, units=cfg.TEST.NMS_UNITS)
        kept.append(moments)
        filled.append(has)
    results = evaluate_moments(torch.cat(kept).cpu(), torch.cat(filled).cpu(), gt)
    elapsed = time.perf_counter() - start
    return elapsed / num_queries, results


def time_data_loading(data, max_batches, by_video=False):
    """Training queries per second of the configured loader (``data``: the run's
    tan.data.RunData; needs the dataset on disk); ``by_video``: MMN's batches of videos."""
    loader = data.train_loader(distributed=False, by_video=by_video)
    loader.sampler.set_epoch(1)
    iterator = iter(loader)
    next(iterator)  # workers started, first files opened
    start, samples = time.perf_counter(), 0
    for _, batch in zip(range(max_batches), iterator):
        samples += len(batch["durations"])
    return samples / (time.perf_counter() - start)
