"""microsoft/2D-TAN's six experiment files (experiments/{benchmark}/2D-TAN-*.yaml), written
key for key in its layout from the values that differ between them: the tests convert
them without the repository at hand."""
import os

import yaml

# benchmark: (its DATASET.NAME, data folder, features, TARGET_STRIDE, D_in, frame kernel, NUM_SCALE_LAYERS,
#             map layers, kernel, IoU range, test IoUs)
BENCHMARKS = {
    "tacos": ("TACoS", "TACoS", "c3d", 2, 4096, 2, [16, 8, 8, 8], 8, 5, (0.3, 0.7), "0.1,0.3,0.5,0.7"),
    "charades": ("Charades", "Charades-STA", "vgg_rgb", 16, 4096, 16, [16], 8, 5, (0.5, 1.0), "0.5,0.7"),
    "activitynet": ("ActivityNet", "ActivityNet", "c3d", 4, 500, 4, [16, 8, 8], 4, 9, (0.5, 1.0), "0.3,0.5,0.7"),
}
# (benchmark, map): (NO_VAL, EVAL_TRAIN, NMS_THRESH, the checkpoint file it names)
RUNS = {
    ("tacos", "conv"): (True, False, 0.5, "TACoS/iter016165-0.4644-0.7443.pkl"),
    ("tacos", "pool"): (False, True, 0.4, "TACoS/iter010370-0.4759-0.7031.pkl"),
    ("charades", "conv"): (True, True, 0.5, "Charades/iter005418-0.4277-0.8062.pkl"),
    ("charades", "pool"): (True, True, 0.45, "Charades/iter004257-0.4094-0.8384.pkl"),
    ("activitynet", "conv"): (False, True, 0.5, "ActivityNet/iter009352-0.5875-0.8565.pkl"),
    ("activitynet", "pool"): (False, True, 0.5, "ActivityNet/iter005845-0.5945-0.8744.pkl"),
}
STEMS = {"tacos": "2D-TAN-128x128-K5L8", "charades": "2D-TAN-16x16-K5L8", "activitynet": "2D-TAN-64x64-K9L4"}


def experiment(bench, kind):
    name, folder, vis, stride, d_in, kernel, scales, layers, k, (lo, hi), tious = BENCHMARKS[bench]
    no_val, eval_train, nms, checkpoint = RUNS[(bench, kind)]
    prop = {"NAME": "SparsePropConv" if kind == "conv" else "SparsePropMaxPool",
            "PARAMS": {**({"HIDDEN_SIZE": 512} if kind == "conv" else {}), "NUM_SCALE_LAYERS": scales}}
    return {
        "WORKERS": 16, "MODEL_DIR": "./checkpoints", "RESULT_DIR": "./results", "LOG_DIR": "./log",
        "DATA_DIR": f"./data/{folder}",
        "DATASET": {"NAME": name, "VIS_INPUT_TYPE": vis, "NO_VAL": no_val, "NUM_SAMPLE_CLIPS": 256,
                    "TARGET_STRIDE": stride, "NORMALIZE": True, "RANDOM_SAMPLING": False},
        "TEST": {"BATCH_SIZE": 32, "RECALL": "1,5", "TIOU": tious, "EVAL_TRAIN": eval_train, "NMS_THRESH": nms},
        "CUDNN": {"DETERMINISTIC": False, "BENCHMARK": True},
        "TRAIN": {"BATCH_SIZE": 32, "LR": 0.0001, "WEIGHT_DECAY": 0.0, "MAX_EPOCH": 100, "CONTINUE": False},
        "LOSS": {"NAME": "bce_rescale_loss", "PARAMS": {"MIN_IOU": lo, "MAX_IOU": hi, "BIAS": 0.0}},
        "TAN": {
            "FRAME_MODULE": {"NAME": "FrameAvgPool", "PARAMS": {"INPUT_SIZE": d_in, "HIDDEN_SIZE": 512,
                                                                 "KERNEL_SIZE": kernel, "STRIDE": kernel}},
            "PROP_MODULE": prop,
            "FUSION_MODULE": {"NAME": "BaseFusion", "PARAMS": {
                "HIDDEN_SIZE": 512, "TXT_INPUT_SIZE": 300, "TXT_HIDDEN_SIZE": 512,
                "LSTM": {"NUM_LAYERS": 3, "BIDIRECTIONAL": False}}},
            "MAP_MODULE": {"NAME": "MapConv", "PARAMS": {
                "INPUT_SIZE": 512, "HIDDEN_SIZES": [512] * layers, "KERNEL_SIZES": [k] * layers,
                "STRIDES": [1] * layers, "PADDINGS": [16] + [0] * (layers - 1), "DILATIONS": [1] * layers}},
            "PRED_INPUT_SIZE": 512},
        "MODEL": {"NAME": "TAN", "CHECKPOINT": f"./checkpoints/{checkpoint}"},
    }


def write_experiments(root):
    """The six files under ``root``/{benchmark}/; returns their paths."""
    paths = []
    for bench, kind in RUNS:
        path = os.path.join(root, bench, f"{STEMS[bench]}-{kind}.yaml")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            yaml.safe_dump(experiment(bench, kind), f, sort_keys=False)
        paths.append(path)
    return sorted(paths)
