"""The reference's weight names (its TAN's state dict) -> this model's (docs/tan_msra.md §2).

| reference | tan |
|---|---|
| frame_layer.vis_conv | featpool.conv |
| prop_layer.layers.0.0 (SparsePropConv) | feat2d.first |
| prop_layer.layers.{s}.{l} (SparsePropConv) | feat2d.convs.{d}, d = L_0 + ... + L_{s-1} + l - 1 |
| fusion_layer.textual_encoder | fusion.lstm |
| fusion_layer.tex_linear | fusion.fc |
| fusion_layer.vis_conv | fusion.conv |
| map_layer.convs.{l} | map_conv.convs.{l} |
| pred_layer | map_conv.pred |

Names that are already this model's pass unchanged, so its own checkpoints load too.
"""
import re

from .maps import prop_conv_name

RENAMED_PREFIXES = (
    ("frame_layer.vis_conv.", "featpool.conv."),
    ("fusion_layer.textual_encoder.", "fusion.lstm."),
    ("fusion_layer.tex_linear.", "fusion.fc."),
    ("fusion_layer.vis_conv.", "fusion.conv."),
    ("map_layer.convs.", "map_conv.convs."),
    ("pred_layer.", "map_conv.pred."),
)
_PROP_LAYER = re.compile(r"prop_layer\.layers\.(\d+)\.(\d+)\.(.+)")


def own_name(name, num_scale_layers):
    """This model's name of the reference's weight ``name``."""
    for old, new in RENAMED_PREFIXES:
        if name.startswith(old):
            return new + name[len(old):]
    prop = _PROP_LAYER.fullmatch(name)
    if prop:
        scale, layer, rest = int(prop.group(1)), int(prop.group(2)), prop.group(3)
        return f"feat2d.{prop_conv_name(scale, layer, num_scale_layers)}.{rest}"
    return name


def adapt_reference_state(state, num_scale_layers):
    """``state`` with the reference's names mapped onto this model's, in its order."""
    return {own_name(name, num_scale_layers): value for name, value in state.items()}
