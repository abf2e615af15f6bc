"""openai CLIP's published weights (``ViT-B-32.pt``: a TorchScript archive, or a
plain state dict) as a ``transformers`` CLIPModel, and its BPE vocabulary
(``bpe_simple_vocab_16e6.txt.gz``) as a CLIPTokenizer.

The archive's tensors are renamed to the CLIPModel's, as transformers'
conversion script renames them: attention's packed ``in_proj`` is split into
query, key and value; ``visual.proj`` and ``text_projection`` (used as
``x @ P``) become linear layers (transposed). The sizes are read off the
tensors, as openai's ``build_model`` reads them.
"""
import gzip
import json
import os
import tempfile

import torch

from .files import require_file, weights_error

SOURCE = ("openai publishes it (the clip package downloads it into ~/.cache/clip: "
          "python -c \"import clip; clip.load('ViT-B/32')\")")
WHAT = "openai CLIP weights file"
VOCAB_FILE = "bpe_simple_vocab_16e6.txt.gz"
VOCAB_SOURCE = f"openai's clip package ships it (clip/{VOCAB_FILE}); put it beside the weights file"
_LAYER = {"attn.out_proj": "self_attn.out_proj", "ln_1": "layer_norm1", "ln_2": "layer_norm2",
          "mlp.c_fc": "mlp.fc1", "mlp.c_proj": "mlp.fc2"}

# openai's name -> CLIPModel's, for the tensors outside the transformer layers
_FIXED_NAMES = {
    "token_embedding.weight": "text_model.embeddings.token_embedding.weight",
    "positional_embedding": "text_model.embeddings.position_embedding.weight",
    "ln_final.weight": "text_model.final_layer_norm.weight", "ln_final.bias": "text_model.final_layer_norm.bias",
    "visual.ln_pre.weight": "vision_model.pre_layrnorm.weight", "visual.ln_pre.bias": "vision_model.pre_layrnorm.bias",
    "visual.ln_post.weight": "vision_model.post_layernorm.weight",
    "visual.ln_post.bias": "vision_model.post_layernorm.bias",
    "visual.conv1.weight": "vision_model.embeddings.patch_embedding.weight",
    "visual.class_embedding": "vision_model.embeddings.class_embedding",
    "visual.positional_embedding": "vision_model.embeddings.position_embedding.weight",
    "logit_scale": "logit_scale"}


def is_openai_archive(name):
    return os.path.isfile(name) or name.endswith((".pt", ".pth"))


def read_state(path):
    require_file(path, WHAT, SOURCE)
    try:
        state = torch.jit.load(path, map_location="cpu").state_dict()
    except (RuntimeError, ValueError):
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001  (any failure: not such a file)
            raise weights_error(path, WHAT, f"neither a TorchScript archive nor a state dict of tensors "
                                            f"({type(e).__name__}; truncated, or another kind of file)",
                                SOURCE) from None
    if not isinstance(state, dict) or "visual.proj" not in state or "token_embedding.weight" not in state:
        raise weights_error(path, WHAT, "expected openai CLIP ViT tensors (visual.proj, token_embedding.weight, ...)",
                            SOURCE)
    return {k: v.float() for k, v in state.items()}


def _layers(state, prefix):
    return len({k.split(".")[len(prefix.split("."))] for k in state if k.startswith(prefix + ".")})


def clip_config(state):
    """The CLIPConfig of openai tensors, read off their shapes as openai's build_model does."""
    from transformers import CLIPConfig

    vision_width, patch = state["visual.conv1.weight"].shape[0], state["visual.conv1.weight"].shape[-1]
    grid = round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5)
    text_width, vocab = state["ln_final.weight"].shape[0], state["token_embedding.weight"].shape[0]
    vision = dict(hidden_size=vision_width, intermediate_size=vision_width * 4, patch_size=patch,
                  image_size=patch * grid, num_hidden_layers=_layers(state, "visual.transformer.resblocks"),
                  num_attention_heads=vision_width // 64, hidden_act="quick_gelu")
    text = dict(hidden_size=text_width, intermediate_size=text_width * 4, vocab_size=vocab,
                max_position_embeddings=state["positional_embedding"].shape[0],
                num_hidden_layers=_layers(state, "transformer.resblocks"), num_attention_heads=max(text_width // 64, 1),
                hidden_act="quick_gelu", bos_token_id=vocab - 2, eos_token_id=vocab - 1, pad_token_id=vocab - 1)
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=state["text_projection"].shape[1])


def _rename_layer(rest, tensor, out, prefix):
    name = rest.split(".", 1)
    index, part = name[0], name[1]
    if part.startswith("attn.in_proj_"):
        kind = part[len("attn.in_proj_"):]
        for which, piece in zip("qkv", tensor.chunk(3, dim=0)):
            out[f"{prefix}.{index}.self_attn.{which}_proj.{kind}"] = piece
        return
    for old, new in _LAYER.items():
        if part.startswith(old + "."):
            out[f"{prefix}.{index}.{new}{part[len(old):]}"] = tensor
            return
    raise KeyError(part)


def hf_state(state):
    """openai tensor names -> CLIPModel's."""
    fixed = _FIXED_NAMES
    out = {"text_projection.weight": state["text_projection"].t().contiguous(),
           "visual_projection.weight": state["visual.proj"].t().contiguous()}
    for name, tensor in state.items():
        if name in fixed:
            out[fixed[name]] = tensor
        elif name.startswith("visual.transformer.resblocks."):
            _rename_layer(name[len("visual.transformer.resblocks."):], tensor, out, "vision_model.encoder.layers")
        elif name.startswith("transformer.resblocks."):
            _rename_layer(name[len("transformer.resblocks."):], tensor, out, "text_model.encoder.layers")
    return out


def load_openai_clip(path):
    """A CLIPModel holding the weights of openai's file at ``path``, every tensor loaded."""
    from transformers import CLIPModel

    state = read_state(path)
    try:
        model = CLIPModel(clip_config(state))
        missing, unexpected = model.load_state_dict(hf_state(state), strict=False)
    except (KeyError, RuntimeError) as e:
        raise weights_error(path, WHAT, f"its tensors do not make a CLIP ViT ({type(e).__name__}: "
                                        f"{str(e).splitlines()[0][:160]})", SOURCE) from None
    missing = [m for m in missing if not m.endswith("position_ids")]
    if missing or unexpected:
        raise weights_error(path, WHAT, f"tensors missing ({', '.join(missing[:3])}) or left over "
                                        f"({', '.join(unexpected[:3])})", SOURCE)
    return model.eval()


def _bytes_to_unicode():
    """GPT-2's byte-to-character table, which CLIP's BPE is written in."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return [chr(c) for c in chars]


def vocabulary_file(weights_path):
    """The BPE vocabulary beside the weights file, else the one the clip package ships; None if neither."""
    beside = os.path.join(os.path.dirname(os.path.abspath(weights_path)), VOCAB_FILE)
    if os.path.isfile(beside):
        return beside
    try:
        import clip  # noqa: F401  (openai's package, when installed)
        shipped = os.path.join(os.path.dirname(clip.__file__), VOCAB_FILE)
        return shipped if os.path.isfile(shipped) else None
    except ImportError:
        return None


def load_openai_tokenizer(weights_path, vocab_size):
    """A CLIPTokenizer with openai's BPE (the file found by :func:`vocabulary_file`): the same ids."""
    from transformers import CLIPTokenizer

    path = vocabulary_file(weights_path)
    if path is None:
        raise weights_error(os.path.join(os.path.dirname(os.path.abspath(weights_path)), VOCAB_FILE),
                            "CLIP BPE vocabulary", "no such file (sentences need it)", VOCAB_SOURCE)
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            merges = [tuple(line.split()) for line in f.read().split("\n")[1:] if line.strip()]
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise weights_error(path, "CLIP BPE vocabulary", f"cannot be read ({e})", VOCAB_SOURCE) from None
    merges = merges[:vocab_size - 512 - 2]
    symbols = _bytes_to_unicode()
    vocab = symbols + [s + "</w>" for s in symbols] + ["".join(m) for m in merges] + ["<|startoftext|>",
                                                                                       "<|endoftext|>"]
    if len(vocab) != vocab_size or any(len(m) != 2 for m in merges):
        raise weights_error(path, "CLIP BPE vocabulary", f"{len(vocab)} tokens, expected the weights' {vocab_size}",
                            VOCAB_SOURCE)
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump({token: i for i, token in enumerate(vocab)}, f)
        with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")
        return CLIPTokenizer(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"),
                             pad_token="<|endoftext|>")


def openai_state(model):
    """A CLIPModel's tensors under openai's names (the inverse of :func:`hf_state`)."""
    ours = {v: k for k, v in _FIXED_NAMES.items()}
    state = {"text_projection": model.text_projection.weight.t(), "visual.proj": model.visual_projection.weight.t()}
    layers = {}
    for name, tensor in model.state_dict().items():
        if name in ours:
            state[ours[name]] = tensor
        elif ".encoder.layers." in name:
            tower, rest = name.split(".encoder.layers.")
            index, part = rest.split(".", 1)
            prefix = ("visual.transformer.resblocks" if tower == "vision_model" else "transformer.resblocks") + \
                f".{index}"
            if part.startswith("self_attn.") and part.split(".")[1] in ("q_proj", "k_proj", "v_proj"):
                layers.setdefault((prefix, part.rsplit(".", 1)[1]), {})[part.split(".")[1][0]] = tensor
                continue
            old = next(o for o, new in _LAYER.items() if part.startswith(new + "."))
            state[f"{prefix}.{old}{part[len(_LAYER[old]):]}"] = tensor
    for (prefix, kind), parts in layers.items():
        state[f"{prefix}.attn.in_proj_{kind}"] = torch.cat([parts["q"], parts["k"], parts["v"]])
    return {k: v.detach().clone().contiguous() for k, v in state.items()}


class _Tensors(torch.nn.Module):
    """Tensors under dotted names, for an archive whose state_dict gives them back."""

    def __init__(self, state):
        super().__init__()
        for name, tensor in state.items():
            owner = self
            for part in name.split(".")[:-1]:
                if not hasattr(owner, part):
                    owner.add_module(part, torch.nn.Module())
                owner = getattr(owner, part)
            owner.register_parameter(name.split(".")[-1], torch.nn.Parameter(tensor, requires_grad=False))

    def forward(self, x):
        return x


def write_archive(model, path, merges):
    """``model`` (a CLIPModel) as openai's file holds it: a TorchScript archive of openai's tensor
    names, with the BPE vocabulary ``merges`` beside it (atomically, both)."""
    from ...utils.io import atomic_write_bytes

    scripted = torch.jit.script(_Tensors(openai_state(model)))
    with tempfile.NamedTemporaryFile(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp") as f:
        torch.jit.save(scripted, f.name)
        archive = open(f.name, "rb").read()
    lines = "tiny CLIP BPE vocabulary\n" + "\n".join(" ".join(m) for m in merges) + "\n"
    atomic_write_bytes(os.path.join(os.path.dirname(os.path.abspath(path)), VOCAB_FILE),
                       gzip.compress(lines.encode("utf-8"), mtime=0))
    atomic_write_bytes(path, archive)
