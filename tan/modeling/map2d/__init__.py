"""The pieces every model of the 2D-map family shares: the feature pooling,
the sparse 2D map, the row-strip convolutions, the LSTM sentence vector, the
reference codes' white-space words, and their settings."""
