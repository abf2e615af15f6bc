"""MMN's timed workloads (MODEL.ARCHITECTURE "MMN"): training steps and
inference on random batches of videos with their sentences, ours and the
baseline written MMN's way (reference_mmn.py). The evaluation and data
workloads are shared with 2D-TAN (workloads.py)."""
import torch

from tan.engine.step import move_batch

from oracles.reference_mmn import ReferenceMMN, mmn_optimizer, mmn_train_step, to_mmn_batch
from .workloads import WORDS, build_ours, our_inference_step, our_train_step


def random_video_batch(cfg, videos, sentences_per_video, device, seed=0):
    """A collated batch of ``videos`` videos with ``sentences_per_video`` sentences each
    (GloVe-sized word vectors; moments spread over each video)."""
    gen = torch.Generator().manual_seed(seed)
    mmn = cfg.MODEL.MMN
    s = videos * sentences_per_video
    video_index = torch.arange(videos).repeat_interleave(sentences_per_video)
    durations = (torch.rand(videos, generator=gen) * 100 + 20)[video_index]
    starts = torch.rand(s, generator=gen) * 0.7 * durations
    moments = torch.stack([starts, starts + (0.05 + 0.25 * torch.rand(s, generator=gen)) * durations], dim=1)
    batch = dict(feats=torch.randn(videos, cfg.INPUT.NUM_PRE_CLIPS, mmn.FEATPOOL.INPUT_SIZE, generator=gen).abs(),
                 queries=torch.randn(s, WORDS, cfg.INPUT.PRE_QUERY_SIZE, generator=gen),
                 wordlens=torch.randint(WORDS // 2, WORDS + 1, (s,), generator=gen), video_index=video_index,
                 durations=durations, moments=moments, gt_moments=moments[:, None, :], indices=torch.arange(s))
    pin = device.type == "cuda"
    return {k: (v.pin_memory() if pin else v) for k, v in batch.items()}


def build(cfg, impl, device):
    if impl == "reference":
        torch.manual_seed(cfg.SEED)
        return ReferenceMMN(cfg).to(device)
    return build_ours(cfg, device)


def train_step_fn(cfg, impl, model, batch, device):
    """One optimisation step as our trainer does it, or as MMN's does (its loader
    delivers per-video lists and stored N x N IoU maps, built outside the timing)."""
    if impl != "reference":
        return our_train_step(cfg, model, batch, device)
    optimizer = mmn_optimizer(cfg, model)
    mmn_batch = to_mmn_batch(move_batch(batch, device), cfg.MODEL.MMN.NUM_CLIPS)

    def step():
        mmn_train_step(model, optimizer, mmn_batch, cfg)
    return step


def inference_step_fn(cfg, impl, model, batch, device):
    """Test scores of every sentence of the batch."""
    if impl != "reference":
        return our_inference_step(cfg, model, batch, device)
    model.eval()
    mmn_batch = to_mmn_batch(move_batch(batch, device), cfg.MODEL.MMN.NUM_CLIPS)

    @torch.no_grad()
    def step():
        model.test_scores(model(mmn_batch["feats"], mmn_batch["queries"], mmn_batch["wordlens"]))
    return step
