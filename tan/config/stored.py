"""The config a checkpoint was trained with, as tan stores it in the file
(docs/checkpoints.md §1), or a config file for checkpoints that carry none."""
from ..errors import TanError
from ..utils.checkpoint_file import read_checkpoint, stored_config
from .setup import load_config, load_config_text


def checkpoint_config(path, config_file=None, opts=()):
    """The config to use checkpoint ``path`` with: ``config_file`` when given, else the
    config the checkpoint carries; ``opts`` (KEY VALUE pairs) on top. An error when
    there is neither.

    A stored config describes the machine it was trained on: its MODEL.DEVICE
    becomes "auto" (this machine's GPU if any, else the CPU) unless ``opts`` set
    it; its relative paths (DATASETS.ROOT) are taken from the current directory."""
    if config_file:
        return load_config(config_file, opts)
    if "MODEL.DEVICE" not in list(opts)[0::2]:
        opts = ["MODEL.DEVICE", "auto", *opts]
    text = stored_config(read_checkpoint(path))
    if text is None:
        raise TanError(f"checkpoint {path!r} carries no config (it was saved by the reference code or an older "
                       f"tan, or holds bare weights); pass the config it was trained with: --config-file FILE")
    return load_config_text(text, f"the config stored in checkpoint {path!r}", opts)
