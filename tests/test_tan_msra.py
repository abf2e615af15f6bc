"""microsoft/2D-TAN as TAN_MSRA (docs/tan_msra.md): the state dict of its code, its
arithmetic (tests/oracles/reference_tan_msra.py) in float64, a checkpoint in its
release layout through tan-test with its evaluation's numbers, its experiment files
through tan-convert-config, and training on the synthetic data."""
import csv
import glob
import json
import os
import re
from contextlib import contextmanager

import h5py
import numpy as np
import pytest
import torch
import yaml

from oracles import reference_tan_msra as ref
from helpers.missing_keys import unclear_messages
from helpers.tan_msra_experiments import write_experiments
from conftest import ONE_THREAD, REPO, run_main
from tan_apps.commands.convert_config import main as convert_config
from tan.engine.setup import EVALUATION_SPLITS
from tan.config import load_config
from tan.config.models import MODELS, declarations
from tan.data import RunData, sentence_encoder
from tan.data.features.clip_inputs import ResampledClips
from tan.evaluation import evaluate_moments, top_candidates
from tan.engine.inference import inference
from tan.engine.step import forward_batch
from tan.errors import TanError
from tan.modeling import build_model
from tan.modeling.map2d.feat2d import build_mask2d
from tan.modeling.map2d.strips import build_weight_maps
from tan.modeling.tan_msra.clips import AveragedClips
from tan.modeling.tan_msra.config import pooling_counts
from tan.modeling.tan_msra.map_conv import masked_weights
from tan.modeling.map2d.whitespace_words import ReferenceVocabulary, reference_words
from tan.utils.checkpoint_file import load_model_weights, model_state_from, read_checkpoint

FIXTURES = os.path.join(REPO, "tests", "fixtures")
SYNTHETIC = os.path.join(REPO, "configs", "tan_msra_synthetic.yaml")
CONFIGS = {"tacos": "tan_msra_tacos_128x128_k5l8", "charades": "tan_msra_charades_16x16_k5l8",
           "activitynet": "tan_msra_activitynet_64x64_k9l4"}


@contextmanager
def one_thread():
    """As the tools run under ONE_THREAD: the same reductions, so the same bits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def experiments(tmp_path_factory):
    """Its six experiment files, in its repository's layout (reference/experiments/{benchmark}/)."""
    folder = tmp_path_factory.mktemp("reference") / "experiments"
    write_experiments(str(folder))
    return str(folder)


@pytest.fixture(autouse=True)
def single_thread():
    """Every test in one thread: the tools it compares with run so, and a loaded machine stays fast."""
    with one_thread():
        yield


# ------------------------------------------------------------ (a) its state dict

def test_the_state_dict_is_that_of_its_code_after_adapt_state_dict():
    """tests/fixtures/tan_msra_state_dict.json was written by its own model code (TACoS pool and
    conv experiment files); its names map onto ours one to one, with the same shapes, and the
    reference module has its layout."""
    expected = json.load(open(os.path.join(FIXTURES, "tan_msra_state_dict.json")))
    for prop in ("pool", "conv"):
        cfg = load_config(os.path.join(REPO, "configs", f"{CONFIGS['tacos']}_{prop}.yaml"))
        model = build_model(cfg)
        theirs = {name: shape for name, shape in expected[prop]}
        ours = {name: list(value.shape) for name, value in model.state_dict().items()}
        assert model.adapt_state_dict(theirs) == ours
        assert len(theirs) == len(ours)
        assert model.adapt_state_dict(ours) == ours  # tan's own checkpoints load unchanged
        with torch.device("meta"):
            reference = ref.TAN(cfg.MODEL.TAN_MSRA, cfg.INPUT.PRE_QUERY_SIZE)
        assert [[k, list(v.shape)] for k, v in reference.state_dict().items()] == expected[prop]


# ------------------------------------------------------------ (b) its arithmetic, float64

TINY = ["MODEL.TAN_MSRA.FRAME_MODULE.INPUT_SIZE", "24", "MODEL.TAN_MSRA.FRAME_MODULE.HIDDEN_SIZE", "16",
        "MODEL.TAN_MSRA.FUSION_MODULE.TXT_HIDDEN_SIZE", "20", "MODEL.TAN_MSRA.FUSION_MODULE.LSTM.NUM_LAYERS", "2",
        "INPUT.PRE_QUERY_SIZE", "10", "MODEL.TAN_MSRA.MAP_MODULE.HIDDEN_SIZES", "[16, 12]"]
VARIANTS = {
    "pool-dense": ["MODEL.TAN_MSRA.MAP_MODULE.STRIP_ROWS", "0"],
    "pool-strips": ["MODEL.TAN_MSRA.MAP_MODULE.STRIP_ROWS", "4", "MODEL.TAN_MSRA.LOSS.BIAS", "0.2"],
    "conv-strips": ["MODEL.TAN_MSRA.PROP_MODULE.NAME", "SparsePropConv", "MODEL.TAN_MSRA.MAP_MODULE.STRIP_ROWS", "4"],
    # a stack of another form (padding on each layer, a dilation): dense, its own weight maps
    "conv-dilated": ["MODEL.TAN_MSRA.PROP_MODULE.NAME", "SparsePropConv", "MODEL.TAN_MSRA.MAP_MODULE.PADDINGS",
                     "[2, 1]", "MODEL.TAN_MSRA.MAP_MODULE.DILATIONS", "[2, 1]",
                     "MODEL.TAN_MSRA.PROP_MODULE.NUM_SCALE_LAYERS", "[4, 2, 2]"],
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_logits_loss_and_gradients_equal_its_arithmetic_in_float64(variant):
    cfg = load_config(SYNTHETIC, TINY + VARIANTS[variant])
    node = cfg.MODEL.TAN_MSRA
    torch.manual_seed(0)
    reference = ref.TAN(node, cfg.INPUT.PRE_QUERY_SIZE).double()
    ours = build_model(cfg).double()
    load_model_weights(ours, reference.state_dict(), "the reference's weights")
    gen = torch.Generator().manual_seed(1)
    feats = torch.randn(3, cfg.INPUT.NUM_PRE_CLIPS, 24, generator=gen, dtype=torch.float64)
    wordlens = torch.tensor([6, 3, 4])
    queries = torch.randn(3, 6, 10, generator=gen, dtype=torch.float64)
    real = torch.arange(6)[None] < wordlens[:, None]
    queries = queries * real[..., None]  # padded with zeros, as its collate pads
    prediction, map_mask = reference(queries, real.double()[..., None], feats)
    logits = ours(feats, queries, wordlens)
    assert torch.equal(map_mask[0, 0].bool(), ours.mask2d)
    torch.testing.assert_close(logits, prediction[:, 0], rtol=1e-12, atol=1e-14)

    durations = torch.tensor([30.0, 47.5, 13.3])  # float32, as the datasets hold them
    moments = [(3.0, 11.2), (0.5, 40.0), (6.1, 13.3)]
    targets = torch.stack([torch.from_numpy(ref.overlap_map(d.item(), s, e, node.NUM_CLIPS, torch.float64))
                           for d, (s, e) in zip(durations, moments)])[:, None]
    expected, joint_prob = ref.bce_rescale_loss(prediction, map_mask, targets, node.LOSS.MIN_IOU, node.LOSS.MAX_IOU,
                                                node.LOSS.BIAS)
    loss = ours.losses(logits, {"gt_moments": torch.tensor(moments, dtype=torch.float64)[:, None],
                                "durations": durations})["loss"]
    torch.testing.assert_close(loss, expected, rtol=1e-12, atol=1e-14)
    # scores are float32 by the model contract
    torch.testing.assert_close(ours.scores(logits).double(), joint_prob[:, 0], rtol=0, atol=1e-7)
    loss.backward(), expected.backward()
    theirs = ours.adapt_state_dict({name: p.grad for name, p in reference.named_parameters()})
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, theirs[name], rtol=1e-10, atol=1e-13, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("bench", list(CONFIGS))
def test_its_weight_maps_equal_tans_for_every_released_stack(bench):
    """Its get_padded_mask_and_weight, chained over the map convs: tan's build_weight_maps, value for value."""
    cfg = load_config(os.path.join(REPO, "configs", f"{CONFIGS[bench]}_pool.yaml"))
    node = cfg.MODEL.TAN_MSRA
    maps = node.MAP_MODULE
    mask2d = build_mask2d(node.NUM_CLIPS, pooling_counts(node.PROP_MODULE.NUM_SCALE_LAYERS))
    convs = [torch.nn.Conv2d(1, 1, k, s, p, d) for k, s, p, d in
             zip(maps.KERNEL_SIZES, maps.STRIDES, maps.PADDINGS, maps.DILATIONS)]
    tans = build_weight_maps(mask2d, maps.KERNEL_SIZES[0], len(convs))
    mask = mask2d[None, None].float()
    for ours, tan_map, conv in zip(masked_weights(mask2d, convs), tans, convs):
        mask, theirs = ref.get_padded_mask_and_weight(mask, conv)
        assert torch.equal(ours, theirs[0, 0]) and torch.equal(ours, tan_map)


def test_its_feature_preparation_bit_for_bit_and_how_far_tans_is():
    gen = torch.Generator().manual_seed(2)
    for rows in (10, 37, 300):  # fewer rows than clips (empty buckets), and more
        feats = torch.rand(rows, 24, generator=gen) * 3
        ours = AveragedClips(16).base(feats.numpy())
        assert np.array_equal(ours, ref.normalize_and_average(feats, 16).numpy())
        assert np.array_equal(AveragedClips(16, normalize=False).base(feats.numpy()),
                              ref.normalize_and_average(feats, 16, normalize=False).numpy())
        # the same buckets as tan's ResampledClips, other rounding
        assert np.abs(ours - ResampledClips(16).base(feats.numpy())).max() < 1e-6


def test_its_words():
    assert reference_words("  A man washes the bowl.") == ["a", "man", "washes", "the", "bowl."]
    assert reference_words("person opens the door.", drop_final_period=True) == ["person", "opens", "the", "door"]
    vocabulary = ReferenceVocabulary({"door": np.ones(3, np.float32), "the": np.zeros(3, np.float32) + 2}, 3, True)
    ids = vocabulary.encode_sentence("Opens THE door.")
    assert vocabulary.lookup(ids).tolist() == [[0, 0, 0], [2, 2, 2], [1, 1, 1]]
    assert vocabulary.drop_reason(vocabulary.encode_sentence("nobody knows")) is None  # unknown words: zeros


def test_the_whitespace_words_feed_the_datasets(synthetic_root):
    cfg = load_config(SYNTHETIC, ["DATASETS.ROOT", synthetic_root, "MODEL.TAN_MSRA.TOKENS", "whitespace"])
    dataset = RunData(cfg, splits=EVALUATION_SPLITS).dataset("synthetic_test")
    index = next(i for i, s in enumerate(dataset.sentences) if s.endswith("."))
    words = dataset.query(index)
    assert words.shape == (len(dataset.sentences[index].split()), 300)
    assert not words[-1].any() and words[0].any()  # "bowl." has no vector; "a" or "the" has one
    # prediction splits new text the same way
    [encoded] = sentence_encoder(cfg, declarations(cfg).text_input)(["The man holds the bowl."])
    assert encoded.shape == (5, 300) and not encoded[-1].any() and encoded[0].any()


# ------------------------------------------------------------ (c) its release layout through tan-test

@pytest.fixture(scope="module")
def released(synthetic_root, tmp_path_factory):
    """A checkpoint laid out as its .pkl files (a bare state dict, "module." names, from the
    reference module's random weights), evaluated by tan-test."""
    folder = tmp_path_factory.mktemp("tan_msra_release")
    cfg = load_config(SYNTHETIC)
    torch.manual_seed(3)
    reference = ref.TAN(cfg.MODEL.TAN_MSRA, cfg.INPUT.PRE_QUERY_SIZE)
    with torch.no_grad():
        reference.pred_layer.weight.mul_(40)  # spread the untrained scores
    path = folder / "iter000000-0.0000-0.0000.pkl"
    torch.save({f"module.{k}": v for k, v in reference.state_dict().items()}, path)
    out = folder / "out"
    proc = run_main("test_net", "--config-file", SYNTHETIC, "--ckpt", str(path), "DATASETS.ROOT", synthetic_root,
                    "OUTPUT_DIR", str(out), "MODEL.DEVICE", "cpu", env=ONE_THREAD, cwd=str(folder))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    results = out / "inference" / path.name / "synthetic_test"
    with open(results / "metrics.json") as f:
        metrics = json.load(f)
    with open(results / "predictions.jsonl") as f:
        predictions = [json.loads(line) for line in f]
    return path, metrics, predictions


@pytest.mark.slow
def test_its_release_layout_evaluates_through_tan_test_with_its_evaluations_numbers(released, synthetic_root):
    path, metrics, predictions = released
    cfg = load_config(SYNTHETIC, ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu"])
    data = RunData(cfg, splits=EVALUATION_SPLITS)
    [loader] = data.test_loaders(False)
    dataset = loader.dataset
    model = build_model(cfg)
    load_model_weights(model, model_state_from(read_checkpoint(str(path)), str(path)), str(path))
    model.eval()
    scores, durations, kept, filled = [], [], [], []
    with torch.no_grad():
        for batch in loader:  # as tan-test batches them
            output = forward_batch(model, batch)
            scores.append(model.scores(output))
            durations.append(batch["durations"])
            moments, _, full = top_candidates(model.candidates(output, batch["durations"]), cfg.TEST.NMS_THRESH)
            kept.append(moments), filled.append(full)
    scores, durations = torch.cat(scores), torch.cat(durations)
    gt = torch.from_numpy(dataset.gt_moments[:, 0])
    # its evaluation over its own proposals of the same scores
    segments = ref.get_proposal_results(scores, durations.tolist(), cfg.MODEL.TAN_MSRA.NUM_CLIPS)
    table, miou, its_kept = ref.evaluate(segments, gt.tolist(), cfg.TEST.NMS_THRESH)
    ours = evaluate_moments(torch.cat(kept), torch.cat(filled), gt)
    for name, value in table.items():
        assert ours[name] == value, name
        assert metrics[name] == value, name
    assert ours["mIoU"] == pytest.approx(miou, rel=1e-12) and metrics["mIoU"] == pytest.approx(miou, rel=1e-12)
    assert metrics["num_queries"] == len(its_kept) == 602
    for moments, record in zip(its_kept, predictions):  # every kept moment, in order
        assert record["moments"] == [[round(a, 4), round(b, 4)] for a, b in moments]
    assert max(metrics[m] for m in table) > 0


# ------------------------------------------------------------ (d) its experiment files

def test_its_experiment_files_convert_and_load(tmp_path, experiments):
    files = sorted(glob.glob(os.path.join(experiments, "*", "*.yaml")))
    assert len(files) == 6
    for path in files:
        bench, stem = os.path.basename(os.path.dirname(path)), os.path.splitext(os.path.basename(path))[0]
        prop = stem.rsplit("-", 1)[1]
        out = convert_config([path, "--out", str(tmp_path / f"{stem}.yaml")])
        cfg = load_config(out)
        released = load_config(os.path.join(REPO, "configs", f"{CONFIGS[bench]}_{prop}.yaml"))
        assert cfg.MODEL.ARCHITECTURE == "TAN_MSRA" and cfg.MODEL.TAN_MSRA == released.MODEL.TAN_MSRA, path
        for key in ("LR", "BATCH_SIZE", "MAX_EPOCH"):
            assert cfg.SOLVER[key] == released.SOLVER[key], (path, key)
        assert (cfg.TEST.NMS_THRESH, cfg.TEST.BATCH_SIZE) == (released.TEST.NMS_THRESH, released.TEST.BATCH_SIZE)
        assert len(cfg.DATASETS.VAL) == len(released.DATASETS.VAL), path
        assert cfg.DATASETS.ROOT == os.path.join(os.path.dirname(experiments), "data",
                                                 {"tacos": "TACoS", "charades": "Charades-STA",
                                                  "activitynet": "ActivityNet"}[bench])
        if bench == "charades":  # the small map: it builds
            build_model(cfg)
        with open(tmp_path / f"{stem}_catalog.yaml") as f:
            catalog = yaml.safe_load(f)
        assert sorted(catalog) == sorted([*cfg.DATASETS.TRAIN, *cfg.DATASETS.VAL, *cfg.DATASETS.TEST])
        text = (tmp_path / f"{stem}.yaml").read_text()
        assert "MODEL.CHECKPOINT: evaluate it with tan-test" in text and "ReduceLROnPlateau" in text
    assert catalog["tan_msra_tacos_test"] == {"annotations": "test.json", "features": "tall_c3d_features.hdf5",
                                              "format": "tacos"}
    charades = yaml.safe_load((tmp_path / "2D-TAN-16x16-K5L8-pool_catalog.yaml").read_text())
    assert charades["tan_msra_charades_test"] == {
        "annotations": "charades_sta_test.txt", "durations": "Charades_v1_test.csv",
        "features": "vgg_rgb_features.hdf5", "format": "charades_txt"}
    anet = yaml.safe_load((tmp_path / "2D-TAN-64x64-K9L4-conv_catalog.yaml").read_text())
    assert anet["tan_msra_activitynet_val"]["feature_key"] == "c3d_features"


def fake_charades(root, rng, experiments):
    """Its repository's layout (experiments/, data/Charades-STA/, .vector_cache/) with a few random
    videos, 16-d features and 8-d word vectors; returns {video: duration}."""
    data, words = root / "data" / "Charades-STA", "a person opens the door closes sits on chair".split()
    for folder in (root / "experiments" / "charades", data, root / ".vector_cache"):
        folder.mkdir(parents=True)
    name = "2D-TAN-16x16-K5L8-pool.yaml"
    (root / "experiments" / "charades" / name).write_text(open(os.path.join(experiments, "charades", name)).read())
    (root / ".vector_cache" / "glove.6B.300d.txt").write_text(
        "".join(f"{w} {' '.join(f'{x:.4f}' for x in rng.standard_normal(8))}\n" for w in words))
    durations = {f"V{i}": float(np.round(rng.uniform(10, 40), 2)) for i in range(6)}
    (data / "Charades_v1_test.csv").write_text("id,length\n" + "".join(f"{v},{d}\n" for v, d in durations.items()))
    lines = []
    for video, duration in durations.items():
        for _ in range(3):
            start = np.round(rng.uniform(0, duration * 0.7), 1)
            end = np.round(start + rng.uniform(1, duration * 0.5), 1)  # may pass the end: clipped
            sentence = " ".join(rng.choice(words + ["Door", "chair,"], size=rng.integers(3, 8)))
            lines.append(f"{video} {start} {end}##{sentence}.\n")
    (data / "charades_sta_test.txt").write_text("".join(lines))
    with h5py.File(data / "vgg_rgb_features.hdf5", "w") as f:
        for video, duration in durations.items():
            f[video] = np.abs(rng.standard_normal((int(duration * 2) + 3, 16))).astype(np.float32)
    return root / "experiments" / "charades" / name


SMALL = ["MODEL.TAN_MSRA.FRAME_MODULE.INPUT_SIZE", "16", "MODEL.TAN_MSRA.FRAME_MODULE.HIDDEN_SIZE", "8",
         "MODEL.TAN_MSRA.FUSION_MODULE.TXT_HIDDEN_SIZE", "8", "MODEL.TAN_MSRA.MAP_MODULE.HIDDEN_SIZES", str([8] * 8),
         "INPUT.PRE_QUERY_SIZE", "8", "DATASETS.TRAIN", "()", "DATALOADER.NUM_WORKERS", "0", "MODEL.DEVICE", "cpu"]


@pytest.mark.slow
def test_a_converted_file_evaluates_its_checkpoint_on_its_data_layout_with_its_numbers(tmp_path, experiments):
    """Its Charades-STA files as its code reads them (the text file cut at ".\\n", the CSV durations, GloVe by
    white-space words, features averaged its way), its model, proposals and eval; and the same files
    through tan-convert-config and tan-test."""
    path = fake_charades(tmp_path / "2D-TAN", np.random.default_rng(4), experiments)
    converted = convert_config([str(path), "--out", str(tmp_path / "charades.yaml")])
    cfg = load_config(converted, SMALL)
    assert cfg.DATASETS.ROOT == str(tmp_path / "2D-TAN" / "data" / "Charades-STA")
    torch.manual_seed(5)
    reference = ref.TAN(cfg.MODEL.TAN_MSRA, cfg.INPUT.PRE_QUERY_SIZE)
    with torch.no_grad():
        reference.pred_layer.weight.mul_(40)
    torch.save(reference.state_dict(), tmp_path / "iter000001-0.0000-0.0000.pkl")
    proc = run_main("test_net", "--config-file", converted, "--ckpt", str(tmp_path / "iter000001-0.0000-0.0000.pkl"),
                    "OUTPUT_DIR", str(tmp_path / "out"), *SMALL, env=ONE_THREAD, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    results = tmp_path / "out" / "inference" / "iter000001-0.0000-0.0000.pkl" / "tan_msra_charades_test"
    metrics = json.loads((results / "metrics.json").read_text())
    predictions = [json.loads(line) for line in (results / "predictions.jsonl").read_text().splitlines()]

    data = tmp_path / "2D-TAN" / "data" / "Charades-STA"
    durations = {row["id"]: float(row["length"]) for row in csv.DictReader(open(data / "Charades_v1_test.csv"))}
    glove = {}
    for line in open(tmp_path / "2D-TAN" / ".vector_cache" / "glove.6B.300d.txt"):
        word, *values = line.rstrip().split(" ")
        glove[word] = torch.tensor([float(x) for x in values])
    queries = []
    for line in open(data / "charades_sta_test.txt"):
        anno, sentence = line.split("##")
        video, start, end = anno.split(" ")
        start, end = float(start), min(float(end), durations[video])
        if start < end:
            queries.append((video, [start, end], sentence.split(".\n")[0], durations[video]))
    scores = []
    with h5py.File(data / "vgg_rgb_features.hdf5", "r") as f, torch.no_grad():
        for video, _, sentence, _ in queries:
            words = torch.stack([glove.get(w.lower(), torch.zeros(8)) for w in sentence.split()])[None]
            clips = ref.normalize_and_average(torch.from_numpy(f[video][:]), cfg.INPUT.NUM_PRE_CLIPS)[None]
            prediction, mask = reference(words, torch.ones(1, words.shape[1], 1), clips)
            scores.append((torch.sigmoid(prediction) * mask)[0, 0])
    segments = ref.get_proposal_results(torch.stack(scores), [q[3] for q in queries], cfg.MODEL.TAN_MSRA.NUM_CLIPS)
    table, miou, kept = ref.evaluate(segments, [q[1] for q in queries], cfg.TEST.NMS_THRESH)
    assert metrics["num_queries"] == len(queries) == 18
    for name, value in table.items():
        assert metrics[name] == value, name
    assert metrics["mIoU"] == pytest.approx(miou, abs=1e-5)  # the ground truth: float32 in tan, float64 in its eval
    for moments, record in zip(kept, predictions):
        assert record["moments"] == [[round(a, 4), round(b, 4)] for a, b in moments]

    again = convert_config([str(path), "--out", str(tmp_path / "elsewhere.yaml"), "--data-root", str(tmp_path)])
    assert load_config(again).DATASETS.ROOT == str(tmp_path)


def test_other_files_are_not_its_and_disagreeing_sizes_are_refused(experiments):
    with open(os.path.join(REPO, "configs", "2dtan_synthetic.yaml")) as f:
        assert MODELS.get("TAN_MSRA").from_foreign_config(yaml.safe_load(f), "x.yaml") is None
    path = os.path.join(experiments, "charades", "2D-TAN-16x16-K5L8-conv.yaml")
    with open(path) as f:
        data = yaml.safe_load(f)
    data["TAN"]["FUSION_MODULE"]["PARAMS"]["HIDDEN_SIZE"] = 256
    with pytest.raises(TanError, match="FUSION_MODULE.PARAMS.HIDDEN_SIZE"):
        MODELS.get("TAN_MSRA").from_foreign_config(data, path)


def test_settings_that_cannot_work_are_refused():
    for opts, key in ((["MODEL.TAN_MSRA.FRAME_MODULE.STRIDE", "2"], "FRAME_MODULE.STRIDE"),
                      (["MODEL.TAN_MSRA.PROP_MODULE.NUM_SCALE_LAYERS", "[17]"], "NUM_SCALE_LAYERS"),
                      (["MODEL.TAN_MSRA.MAP_MODULE.PADDINGS", "[1, 0]"], "MAP_MODULE.PADDINGS"),
                      (["MODEL.TAN_MSRA.MAP_MODULE.STRIDES", "[1]"], "MAP_MODULE.STRIDES"),
                      (["MODEL.TAN_MSRA.PROP_MODULE.NAME", "PropMaxPool"], "PROP_MODULE.NAME")):
        with pytest.raises(TanError, match=key):
            load_config(SYNTHETIC, opts)


# ------------------------------------------------------------ (e) it learns

@pytest.mark.slow
def test_two_epochs_on_the_synthetic_data_beat_the_untrained_model(synthetic_root, tmp_path):
    cfg = load_config(SYNTHETIC, ["DATASETS.ROOT", synthetic_root, "MODEL.DEVICE", "cpu"])
    torch.manual_seed(cfg.SEED)
    [loader] = RunData(cfg, splits=EVALUATION_SPLITS).test_loaders(False)
    untrained = inference(build_model(cfg), loader, "synthetic_test", cfg.TEST.NMS_THRESH, torch.device("cpu"))
    out = tmp_path / "run"
    proc = run_main("train_net", "--config-file", SYNTHETIC, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(out),
                    "MODEL.DEVICE", "cpu", "SOLVER.MAX_EPOCH", "2", "SOLVER.TEST_PERIOD", "0", env=ONE_THREAD,
                    cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    with open(out / "inference" / "model_final" / "synthetic_test" / "metrics.json") as f:
        final = json.load(f)
    assert final["R@1,IoU@0.5"] > untrained["R@1,IoU@0.5"] + 10, (final, untrained)


def test_every_key_its_file_leaves_out_is_named_by_its_path_or_takes_its_codes_default(tmp_path, experiments):
    """Each key of its experiment files removed in turn: it converts (the key has a default in its code),
    or the error names the key by its whole path and says it is missing, never showing None, an empty
    text or the section around it."""
    def convert(source):
        def run(data):
            bad = tmp_path / os.path.basename(source)
            bad.write_text(yaml.safe_dump(data))
            convert_config([str(bad), "--out", str(tmp_path / "out.yaml")])
        return run

    for source in sorted(glob.glob(os.path.join(experiments, "*", "*-pool.yaml"))):
        # without MODEL.NAME the file is no 2D-TAN file
        assert not unclear_messages(yaml.safe_load(open(source)), convert(source), keep={("MODEL", "NAME")}), source


def test_its_prediction_width_left_out_or_its_map_sizes_empty_are_named(tmp_path, experiments):
    def no_prediction_width(data):
        data["TAN"].pop("PRED_INPUT_SIZE", None)
        data["TAN"]["MAP_MODULE"]["PARAMS"]["HIDDEN_SIZES"] = [256, 256]

    def no_map_sizes(data):
        data["TAN"]["MAP_MODULE"]["PARAMS"]["HIDDEN_SIZES"] = []

    source = sorted(glob.glob(os.path.join(experiments, "*", "*-pool.yaml")))[0]
    for change, message in [
        (no_prediction_width, "TAN.PRED_INPUT_SIZE: is missing (its code's default: 512), but the last of "
                              "TAN.MAP_MODULE.PARAMS.HIDDEN_SIZES is 256; its model needs them equal"),
        (no_map_sizes, "TAN.MAP_MODULE.PARAMS.HIDDEN_SIZES: is empty; its map convolutions need one size per layer"),
    ]:
        data = yaml.safe_load(open(source))
        change(data)
        bad = tmp_path / os.path.basename(source)
        bad.write_text(yaml.safe_dump(data))
        with pytest.raises(TanError, match=re.escape(message)):
            convert_config([str(bad), "--out", str(tmp_path / "out.yaml")])
