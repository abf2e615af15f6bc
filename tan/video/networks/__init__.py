"""Feature networks written in torch, for backbones whose published weights are not in a format
that a maintained library loads (SlowFast's Caffe2 blobs)."""
