"""Items -> padded batch tensors."""
import torch


class BatchCollator:
    """Stacks features and pads sentences; ``wordlens`` keeps each real length."""

    def __call__(self, items):
        wordlens = torch.tensor([len(it["query"]) for it in items], dtype=torch.long)
        dim = items[0]["query"].shape[1]
        queries = torch.zeros(len(items), int(wordlens.max()), dim)
        for row, it in enumerate(items):
            queries[row, : len(it["query"])] = it["query"]
        return {
            "feats": torch.stack([it["feats"] for it in items]),  # [B, P, D_in]
            "queries": queries,  # [B, L, E]
            "wordlens": wordlens,  # [B]
            "moments": torch.stack([it["moment"] for it in items]),  # [B, 2]
            "durations": torch.tensor([it["duration"] for it in items], dtype=torch.float32),  # [B]
            "indices": torch.tensor([it["index"] for it in items], dtype=torch.long),  # [B]
        }
