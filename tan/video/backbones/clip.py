"""CLIP through ``transformers``: its image encoder for video clips (the
projected image embedding of each frame, averaged over the clip's frames;
Moment-DETR and lighthouse sample one frame per 2-second clip) and its text
encoder for queries (the token features of the last layer, [L, 512] for
ViT-B/32, with the projected sentence embedding)."""
import html
import json
import os

import torch

from . import register_text_backbone, register_video_backbone
from ..weights.openai_clip import is_openai_archive, load_openai_clip, load_openai_tokenizer, write_archive
from .base import (FrameNormalizer, TextBackbone, VideoBackbone, load_pretrained, preprocessor_settings,
                   quiet_transformers, require_transformers, weights_digest, write_preprocessor)

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
_MODELS = {}  # (name, device, dtype) -> (model, digest): the image and the text side share one load


def load_clip(name, device, dtype):
    """(CLIPModel, digest) of a folder written by save_pretrained, a hub name, or openai's weights file."""
    key = (name, str(device), dtype)
    if key not in _MODELS:
        require_transformers()
        from transformers import CLIPModel

        if is_openai_archive(name):
            model = load_openai_clip(name)
        else:
            model = load_pretrained(CLIPModel, name, "CLIP model").eval()
        digest = weights_digest(model)
        _MODELS[key] = (model.to(device=device, dtype=dtype), digest)
    return _MODELS[key]


@register_video_backbone("clip")
class ClipImages(VideoBackbone):
    def __init__(self, model_name, device, dtype=torch.float32):
        super().__init__(model_name, device, dtype)
        self.model, self.weights = load_clip(model_name, self.device, dtype)
        self.resolution = self.model.config.vision_config.image_size
        self.dim = self.model.config.projection_dim
        mean, std = (CLIP_MEAN, CLIP_STD) if is_openai_archive(model_name) else \
            preprocessor_settings(model_name, CLIP_MEAN, CLIP_STD)
        self.normalize = FrameNormalizer(mean, std, self.device, dtype, eps=1e-8)  # as the released rows

    @torch.no_grad()
    def encode(self, frames):
        clips, per_clip = frames.shape[:2]
        pixels = self.normalize(frames.reshape(clips * per_clip, *frames.shape[2:]))
        pooled = self.model.vision_model(pixel_values=pixels).pooler_output
        embedded = self.model.visual_projection(pooled).float()
        return embedded.view(clips, per_clip, -1).mean(1).cpu().numpy()

    @classmethod
    def write_tiny(cls, folder, seed=0):
        (write_tiny_openai if folder.endswith(".pt") else write_tiny_clip)(folder, seed)


@register_text_backbone("clip")
class ClipText(TextBackbone):
    def __init__(self, model_name, device, dtype=torch.float32, max_length=None):
        super().__init__(model_name, device, dtype)
        require_transformers()
        from transformers import AutoTokenizer

        self.model, self.weights = load_clip(model_name, self.device, dtype)
        vocab = self.model.config.text_config.vocab_size
        self.tokenizer = load_openai_tokenizer(model_name, vocab) if is_openai_archive(model_name) else \
            load_pretrained(AutoTokenizer, model_name, "CLIP tokenizer")
        # Tokens kept, the first and the end one included: a longer sentence keeps its first ones and
        # ends with the end token (openai's tokenizer raises past 77; Moment-DETR's keeps 32).
        longest = self.model.config.text_config.max_position_embeddings
        self.max_length = min(int(max_length or longest), longest)
        self.dim = self.model.config.text_config.hidden_size

    @torch.no_grad()
    def encode(self, sentences):
        sentences = [openai_clean(s) for s in sentences]
        tokens = self.tokenizer(sentences, padding=True, truncation=True, max_length=self.max_length,
                                return_tensors="pt").to(self.device)
        out = self.model.text_model(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"])
        pooled = self.model.text_projection(out.pooler_output).float().cpu().numpy()
        hidden = out.last_hidden_state.float().cpu().numpy()
        lengths = tokens["attention_mask"].sum(1).tolist()
        return [(hidden[i, :n], pooled[i]) for i, n in enumerate(lengths)]

    def record(self):
        return {**super().record(), "max_length": self.max_length}

    @classmethod
    def options_of(cls, record):
        return {"max_length": record.get("max_length")}

    @classmethod
    def write_tiny(cls, folder, seed=0):
        (write_tiny_openai if folder.endswith(".pt") else write_tiny_clip)(folder, seed)


def openai_clean(text):
    """openai's cleaning before CLIP's BPE: ftfy's fixes (curly quotes, mojibake), HTML entities
    undone twice, outer spaces dropped. transformers' tokenizer does the ftfy part only where ftfy is
    installed (the video extra installs it)."""
    try:
        import ftfy
        text = ftfy.fix_text(text)
    except ImportError:
        pass
    return html.unescape(html.unescape(text)).strip()


# A character-level vocabulary: without merges, CLIP's tokenizer spells each word out.
_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789.,;:'\"!?-()/&"
START, END = "<|startoftext|>", "<|endoftext|>"


def write_tiny_clip(folder, seed=0):
    """A CLIP of 2 layers of width 32 on 32 x 32 images, projecting to 32, with a character-level
    tokenizer: what a test can build with no download."""
    require_transformers()
    from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

    os.makedirs(folder, exist_ok=True)
    quiet_transformers()
    vocab = {c: i for i, c in enumerate(_CHARACTERS)}
    vocab.update({c + "</w>": len(_CHARACTERS) + i for i, c in enumerate(_CHARACTERS)})
    start, end = len(vocab), len(vocab) + 1
    vocab.update({START: start, END: end})
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
    tokenizer = CLIPTokenizer(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"))
    text = dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=2, max_position_embeddings=77, bos_token_id=start, eos_token_id=end,
                pad_token_id=end)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32,
                  patch_size=8)
    torch.manual_seed(seed)
    CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=32)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    write_preprocessor(folder, CLIP_MEAN, CLIP_STD, 32)


def write_tiny_openai(path, seed=0):
    """A tiny CLIP (2 layers of width 64 on 32 x 32 images, projecting to 32) as openai's file holds
    its weights: a TorchScript archive, with a BPE vocabulary of 40 merges beside it."""
    require_transformers()
    from transformers import CLIPConfig, CLIPModel

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    merges = [(a, b + "</w>") for a, b in zip(letters, letters[1:] + letters[:1])][:26] + \
        [(a, b) for a, b in zip(letters[::2], letters[1::2])][:14]
    vocab = 512 + len(merges) + 2
    text = dict(vocab_size=vocab, hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=1,
                max_position_embeddings=77, bos_token_id=vocab - 2, eos_token_id=vocab - 1, pad_token_id=vocab - 1,
                hidden_act="quick_gelu")
    vision = dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=1, image_size=32,
                  patch_size=8, hidden_act="quick_gelu")
    torch.manual_seed(seed)
    write_archive(CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=32)), path, merges)
