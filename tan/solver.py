"""Optimizer and learning-rate schedule (docs/model.md §7)."""
import torch


def build_optimizer(cfg, model):
    params = list(model.parameters())
    # One fused kernel for all parameters on CUDA (it also lets an fp16 gradient
    # scaler skip its per-step host sync); the multi-tensor path elsewhere.
    # Both compute Adam exactly as the plain loop does, up to rounding.
    on_cuda = all(p.is_cuda for p in params)
    return torch.optim.Adam(params, lr=cfg.SOLVER.LR, fused=on_cuda or None, foreach=None if on_cuda else True)


def build_lr_scheduler(cfg, optimizer):
    # Stepped once per epoch: the rate drops tenfold after each milestone epoch.
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=list(cfg.SOLVER.MILESTONES), gamma=0.1)
