from .defaults import _C as cfg
from .setup import get_cfg_defaults, load_config, load_config_text, save_config, validate_config

__all__ = ["cfg", "get_cfg_defaults", "load_config", "load_config_text", "save_config", "validate_config"]
