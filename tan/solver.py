"""Optimizer and learning-rate schedule (MODEL.md 3)."""
import torch


def build_optimizer(cfg, model):
    return torch.optim.Adam(model.parameters(), lr=cfg.SOLVER.LR)


def build_lr_scheduler(cfg, optimizer):
    # Stepped once per epoch: the rate drops tenfold after each milestone epoch.
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=list(cfg.SOLVER.MILESTONES), gamma=0.1)
