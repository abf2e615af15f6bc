"""Items -> padded batch tensors."""
import torch


def pad_sentences(sentences, dim):
    """Word-vector sequences [L_i, E] (tensors or arrays) -> (queries [S, L_max, E]
    zero-padded, lengths [S])."""
    lengths = torch.tensor([len(q) for q in sentences], dtype=torch.long)
    queries = torch.zeros(len(sentences), int(lengths.max()), dim)
    for row, q in enumerate(sentences):
        queries[row, :len(q)] = torch.as_tensor(q)
    return queries, lengths


class BatchCollator:
    """Stacks features and pads sentences; ``wordlens`` keeps each real length."""

    def __call__(self, items):
        queries, wordlens = pad_sentences([it["query"] for it in items], items[0]["query"].shape[1])
        return {
            "feats": torch.stack([it["feats"] for it in items]),  # [B, P, D_in]
            "queries": queries,  # [B, L, E]
            "wordlens": wordlens,  # [B]
            "moments": torch.stack([it["moment"] for it in items]),  # [B, 2]
            "durations": torch.tensor([it["duration"] for it in items], dtype=torch.float32),  # [B]
            "indices": torch.tensor([it["index"] for it in items], dtype=torch.long),  # [B]
        }
