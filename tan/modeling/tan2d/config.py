"""2D-TAN's settings, MODEL.TAN (docs/model.md): the shared 2D-map keys, the
sentence LSTM of the integrator and the scaled-IoU loss. Key names and
defaults are the reference code's, so that its YAML files load unchanged."""
from yacs.config import CfgNode as CN

from ..map2d.config import add_map_config, check_counts, check_even_when_bidirectional, check_map_counts, validate_map


def add_tan_config(cfg):
    node = cfg.MODEL.TAN = add_map_config(CN())
    node.INTEGRATOR = CN()
    # Hq: size of the sentence vector (summed over directions when bidirectional).
    node.INTEGRATOR.QUERY_HIDDEN_SIZE = 512
    node.INTEGRATOR.LSTM = CN()
    # Number of stacked LSTM layers of the sentence encoder.
    node.INTEGRATOR.LSTM.NUM_LAYERS = 3
    # Bidirectional LSTM (each direction then has QUERY_HIDDEN_SIZE // 2 units).
    node.INTEGRATOR.LSTM.BIDIRECTIONAL = False


def validate_tan_config(cfg):
    tan = cfg.MODEL.TAN
    check_map_counts(cfg)
    check_counts(cfg, ("INTEGRATOR.QUERY_HIDDEN_SIZE", "INTEGRATOR.LSTM.NUM_LAYERS"))
    validate_map(cfg)
    check_even_when_bidirectional(cfg, tan.INTEGRATOR.LSTM, "INTEGRATOR.QUERY_HIDDEN_SIZE",
                                  tan.INTEGRATOR.QUERY_HIDDEN_SIZE)
