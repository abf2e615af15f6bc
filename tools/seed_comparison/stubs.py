"""What the reference codes import or call that this machine does not have, replaced at run time
only (their files are not touched): torchtext's GloVe, read from the dataset's text file, and CUDA,
for which tensors stay on the CPU."""
import sys
import types

import torch

GLOVE_ROWS = 400000  # glove.6B's vocabulary: the references map an unknown word to this row


def install_glove(path, aliases):
    """A ``torchtext`` module whose ``vocab.pretrained_aliases[name]()`` (each name of ``aliases``)
    reads ``path`` in the 400000-row layout of glove.6B, so that an unknown word is row 400000,
    zeros, as the references' embeddings expect. Every call builds a new vocabulary: the
    references extend the one they get."""
    def load(**kwargs):  # torchtext's own keywords (cache=...) have nothing to do here
        words, rows = [], []
        with open(path, encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split(" ")
                words.append(parts[0])
                rows.append([float(x) for x in parts[1:]])
        vectors = torch.zeros(GLOVE_ROWS, len(rows[0]))
        vectors[:len(rows)] = torch.tensor(rows)
        return types.SimpleNamespace(itos=words + [""] * (GLOVE_ROWS - len(words)),
                                     stoi={w: i for i, w in enumerate(words)}, vectors=vectors, dim=len(rows[0]))

    torchtext = types.ModuleType("torchtext")
    torchtext.vocab = types.SimpleNamespace(pretrained_aliases={name: load for name in aliases})
    sys.modules["torchtext"] = torchtext


def keep_on_cpu():
    """``tensor.to("cuda")`` and ``tensor.cuda()`` leave the tensor on the CPU; CUDA's memory
    figures read 0 and its synchronisation and device choice do nothing."""
    move = torch.Tensor.to

    def on_cpu(self, *args, **kwargs):
        args = tuple("cpu" if (isinstance(a, str) and a.startswith("cuda"))
                     or (isinstance(a, torch.device) and a.type == "cuda") else a for a in args)
        return move(self, *args, **kwargs)

    torch.Tensor.to = on_cpu
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.cuda.max_memory_allocated = lambda *a, **k: 0
    torch.cuda.empty_cache = lambda: None
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.set_device = lambda *a, **k: None
