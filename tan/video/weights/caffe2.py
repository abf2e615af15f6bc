"""SlowFast's published weights (PySlowFast's model zoo, e.g. ``SLOWFAST_8x8_R50.pkl``): a
pickle of Caffe2 blobs, ``{"blobs": {name: array}}``, read into tan/video/networks/slowfast.py.

Each parameter and BatchNorm statistic of the network has one blob, named as
Caffe2's SlowFast named it (``res4_2_branch2b_bn_riv`` is the running
variance of the slow pathway's block 2 of stage 4, ``t_`` marks the fast
pathway, ``..._subsample`` the fast-to-slow fusions). Unlike PySlowFast's
loader, which leaves a tensor at its random value when its blob is missing
or of another shape and says so only in a log, every tensor must be found
here with its shape, or the file is refused: a silently random layer would
give rows that look like features.
"""
import pickle

import numpy as np
import torch

from ...utils.io import atomic_write_bytes
from ..networks.slowfast import BLOCKS, SlowFast, SlowFastShape
from .files import require_file, weights_error

SOURCE = ("PySlowFast's model zoo publishes it: "
          "https://dl.fbaipublicfiles.com/pyslowfast/model_zoo/kinetics400/SLOWFAST_8x8_R50.pkl")
WHAT = "SlowFast weights file"
_BN = {"weight": "s", "bias": "b", "running_mean": "rm", "running_var": "riv"}
_TRAINING_STATE = ("_momentum", "lr", "model_iter")  # optimiser state saved beside the weights


def _bn(torch_prefix, blob_prefix):
    return {f"{torch_prefix}.{k}": f"{blob_prefix}_{v}" for k, v in _BN.items()}


def blob_names(shape):
    """{network state name: Caffe2 blob name} of a :class:`SlowFastShape`."""
    names = {"s1.pathway0_stem.conv.weight": "conv1_w", "s1.pathway1_stem.conv.weight": "t_conv1_w",
             "s1_fuse.conv_f2s.weight": "t_pool1_subsample_w",
             "head.projection.weight": "pred_w", "head.projection.bias": "pred_b"}
    names.update(_bn("s1.pathway0_stem.bn", "res_conv1_bn"))
    names.update(_bn("s1.pathway1_stem.bn", "t_res_conv1_bn"))
    names.update(_bn("s1_fuse.bn", "t_pool1_subsample_bn"))
    for stage, blocks in zip(range(2, 6), BLOCKS[shape.depth]):
        for pathway, mark in ((0, ""), (1, "t_")):
            for i in range(blocks):
                torch_block, blob_block = f"s{stage}.pathway{pathway}_res{i}", f"{mark}res{stage}_{i}"
                if i == 0:
                    names[f"{torch_block}.branch1.weight"] = f"{blob_block}_branch1_w"
                    names.update(_bn(f"{torch_block}.branch1_bn", f"{blob_block}_branch1_bn"))
                for part in "abc":
                    names[f"{torch_block}.branch2.{part}.weight"] = f"{blob_block}_branch2{part}_w"
                    names.update(_bn(f"{torch_block}.branch2.{part}_bn", f"{blob_block}_branch2{part}_bn"))
        if stage < 5:
            fused = f"t_res{stage}_{blocks - 1}_branch2c_bn_subsample"
            names[f"s{stage}_fuse.conv_f2s.weight"] = f"{fused}_w"
            names.update(_bn(f"s{stage}_fuse.bn", f"{fused}_bn"))
    return names


def read_blobs(path):
    """{blob name: array} of a Caffe2 pickle, or the error naming the file."""
    require_file(path, WHAT, SOURCE)
    try:
        with open(path, "rb") as f:
            content = pickle.load(f, encoding="latin1")
    except (EOFError, pickle.UnpicklingError, ValueError, AttributeError, ImportError, IndexError) as e:
        raise weights_error(path, WHAT, f"not a whole Caffe2 pickle (truncated or damaged: {type(e).__name__})",
                            SOURCE) from None
    blobs = content.get("blobs") if isinstance(content, dict) else None
    if not isinstance(blobs, dict) or not blobs:
        raise weights_error(path, WHAT, 'expected a pickle of {"blobs": {name: array}} (a Caffe2 checkpoint)',
                            SOURCE)
    return blobs


def shape_of(blobs, path):
    """The :class:`SlowFastShape` the blobs are of (8x8 only: its fusion kernel is 7 frames)."""
    try:
        slow, fast, fuse = (np.shape(blobs[n]) for n in ("conv1_w", "t_conv1_w", "t_pool1_subsample_w"))
        depth = next(d for d, counts in BLOCKS.items() if f"res4_{counts[2] - 1}_branch2a_w" in blobs
                     and f"res4_{counts[2]}_branch2a_w" not in blobs)
        classes = int(np.shape(blobs["pred_w"])[0])
    except (KeyError, StopIteration, IndexError):
        raise weights_error(path, WHAT, "its blobs are not those of a SlowFast ResNet (conv1_w, t_conv1_w, "
                                        "t_pool1_subsample_w, res4_*, pred_w)", SOURCE) from None
    if fuse[2] != 7:
        raise weights_error(path, WHAT, f"a fast-to-slow fusion over {fuse[2]} frames: expected SlowFast 8x8 "
                                        f"(7), the network the released features were made with", SOURCE)
    return SlowFastShape(depth=depth, width=slow[0], beta_inv=slow[0] // fast[0], fusion_ratio=fuse[0] // fast[0],
                         fusion_kernel=fuse[2], classes=classes)


def load_slowfast(path):
    """The SlowFast network of a Caffe2 pickle, every tensor loaded, in eval mode."""
    blobs = read_blobs(path)
    network = SlowFast(shape_of(blobs, path))
    names = blob_names(network.shape)
    state = {}
    for name, tensor in network.state_dict().items():
        if name.endswith("num_batches_tracked"):
            state[name] = tensor
            continue
        blob = names[name]
        if blob not in blobs:
            raise weights_error(path, WHAT, f"no blob {blob!r} (for {name}): not the whole network", SOURCE)
        value = np.asarray(blobs[blob])
        if tuple(value.shape) != tuple(tensor.shape):
            raise weights_error(path, WHAT, f"blob {blob!r} is {tuple(value.shape)}, expected "
                                            f"{tuple(tensor.shape)} for {name}", SOURCE)
        state[name] = torch.from_numpy(value.astype(np.float32))
    unknown = sorted(set(blobs) - set(names.values()))
    unknown = [b for b in unknown if not b.endswith(_TRAINING_STATE)]
    if unknown:
        raise weights_error(path, WHAT, f"blobs of no SlowFast 8x8 tensor ({', '.join(unknown[:3])}...)", SOURCE)
    network.load_state_dict(state, strict=True)
    return network.eval()


def write_blobs(network, path):
    """``network``'s tensors as a Caffe2 pickle (what the published file holds), with the optimiser's
    blobs such a checkpoint also carries."""
    names = blob_names(network.shape)
    blobs = {names[n]: t.detach().cpu().numpy().astype(np.float32) for n, t in network.state_dict().items()
             if n in names}
    blobs.update({"lr": np.array([0.1], np.float32), "model_iter": np.array([0], np.int64),
                  "conv1_w_momentum": np.zeros_like(blobs["conv1_w"])})
    atomic_write_bytes(path, pickle.dumps({"blobs": blobs}, protocol=2))
