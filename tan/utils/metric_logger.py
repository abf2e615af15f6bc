"""Smoothed and global-average meters for the training log."""
from collections import deque


class SmoothedValue:
    """A window of recent values (median, for the log) and the global mean."""

    def __init__(self, window_size=20):
        self.window = deque(maxlen=window_size)
        self.total = 0.0
        self.count = 0

    def update(self, value):
        self.window.append(value)
        self.total += value
        self.count += 1

    def state_dict(self):
        return {"window": list(self.window), "total": self.total, "count": self.count}

    def load_state_dict(self, state):
        self.window.clear()
        self.window.extend(state["window"])
        self.total, self.count = state["total"], state["count"]

    @property
    def median(self):
        values = sorted(self.window)
        return values[len(values) // 2] if values else float("nan")

    @property
    def avg(self):
        return sum(self.window) / len(self.window) if self.window else float("nan")

    @property
    def global_avg(self):
        return self.total / self.count if self.count else float("nan")


class MetricLogger:
    def __init__(self, window_size=20):
        self.meters = {}
        self.window_size = window_size

    def update(self, **values):
        for name, value in values.items():
            self.meters.setdefault(name, SmoothedValue(self.window_size)).update(float(value))

    def state_dict(self):
        return {name: meter.state_dict() for name, meter in self.meters.items()}

    def load_state_dict(self, state):
        for name, meter in state.items():
            self.meters.setdefault(name, SmoothedValue(self.window_size)).load_state_dict(meter)

    def __getitem__(self, name):
        return self.meters[name]

    def __str__(self):
        return "  ".join(f"{name}: {m.median:.4f} ({m.global_avg:.4f})" for name, m in self.meters.items())
