"""MS-2D-TAN (MODEL.ARCHITECTURE "MS_TAN") against its own arithmetic
(tests/oracles/reference_ms2dtan.py, written from microsoft/VideoX's
MS-2D-TAN): the state-dict table of its experiments, losses, gradients and
scores in float64 for sliding windows (train: windows, short videos; test:
whole videos of different lengths in one batch) and for sampled clips, the
evaluation's proposals and table, its experiment files through
tan-convert-config, and a checkpoint in its release layout through tan-test."""
import json
import os
import re

import numpy as np
import pytest
import torch
import yaml

from tan.config import load_config
from tan.config.models import model_class
from tan.data.collate import BatchCollator
from tan.data.features.clip_inputs import middle_rows
from tan.evaluation import evaluate_moments, top_candidates
from tan.errors import TanError
from tan.modeling import build_model

from conftest import REPO, run_main
from helpers.missing_keys import unclear_messages
import oracles.reference_ms2dtan as ref
from benchmarking.ms2dtan_workloads import reference_model

FIXTURES = os.path.join(REPO, "tests", "fixtures")
TIME_UNIT = 0.5
TIOUS, RECALLS = (0.1, 0.3, 0.5, 0.7), (1, 5)


def tiny_config(tmp_path, prop="conv", maps="gated", kernel=1, sliding=True, window=16, layers=(4, 2, 2)):
    settings = {"NUM_CLIPS": window, "SLIDING_WINDOW": sliding, "TIME_UNIT": TIME_UNIT, "NORMALIZE": True,
                "CLIP_MODULE": {"INPUT_SIZE": 8, "HIDDEN_SIZE": 16, "KERNEL_SIZE": kernel, "STRIDE": kernel},
                "PROP_MODULE": {"NAME": prop, "NUM_LAYERS": list(layers)},
                "FUSION_MODULE": {"TXT_HIDDEN_SIZE": 10, "TXT_NUM_LAYERS": 2, "TXT_BIDIRECTIONAL": True},
                "MAP_MODULE": {"NAME": maps, "HIDDEN_SIZES": [16, 12], "KERNEL_SIZES": [3, 5], "PADDINGS": [1, 2]},
                "LOSS": {"MIN_IOU": 0.3, "MAX_IOU": 0.9, "BIAS": 0.1}}
    path = tmp_path / "ms.yaml"
    path.write_text(yaml.safe_dump({"MODEL": {"ARCHITECTURE": "MS_TAN", "MS_TAN": settings},
                                    "INPUT": {"PRE_QUERY_SIZE": 6}, "TEST": {"NMS_THRESH": 0.49}}))
    return load_config(str(path))


def shared_models(cfg):
    torch.manual_seed(0)
    ours = build_model(cfg).double()
    reference = reference_model(cfg).double()
    reference.load_state_dict(ours.state_dict())  # the same names: its checkpoints load as they are
    return ours, reference


class FixedStart:
    """A generator stand-in: the window start a test chooses."""

    def __init__(self, start):
        self.start = start

    def integers(self, high):
        assert 0 <= self.start < high
        return self.start


def videos(lengths, seed=0):
    """Raw features, moments on a 1/8 s grid (exact in float32) and word vectors of each query."""
    gen = torch.Generator().manual_seed(seed)
    items = []
    for q, length in enumerate(lengths):
        feats = torch.rand(length, 8, generator=gen, dtype=torch.float64)
        duration = length * TIME_UNIT
        start = float(torch.randint(0, int(duration * 4), (1,), generator=gen)) / 8
        end = min(duration, start + float(torch.randint(4, 40, (1,), generator=gen)) / 8)
        words = torch.randn(3 + q, 6, generator=gen, dtype=torch.float64)
        items.append((feats, (start, end), duration, words))
    return items


def our_batch(model_cfg, items, starts=None):
    """Items through tan's clip input and collator (``starts``: training windows)."""
    clips = model_class(model_cfg).clip_input(model_cfg)
    batch = []
    for k, (feats, (s, e), duration, words) in enumerate(items):
        rows, offset, count = clips.take(clips.base(feats.numpy()),
                                         None if starts is None else FixedStart(starts[k]) if starts[k] else None)
        batch.append({"feats": torch.as_tensor(rows), "clip_count": count, "clip_offset": offset, "query": words,
                      "moment": torch.tensor([s, e], dtype=torch.float32),
                      "gt_moments": torch.tensor([[s, e]], dtype=torch.float32), "duration": duration, "index": k})
    if not clips.variable_length:
        for item in batch:
            del item["clip_count"], item["clip_offset"]
    return BatchCollator()(batch)


def reference_batch(cfg, items, train, starts=None):
    ms = cfg.MODEL.MS_TAN
    outs = [ms.NUM_CLIPS // ms.CLIP_MODULE.STRIDE // 2 ** s for s in range(len(ms.PROP_MODULE.NUM_LAYERS))]
    anchors = [n if s == 0 else 2 * n for s, n in enumerate(ms.PROP_MODULE.NUM_LAYERS)]
    prepared = []
    for k, (feats, gt, duration, words) in enumerate(items):
        if ms.SLIDING_WINDOW:
            f, m, maps = ref.sliding_window_item(feats, gt, duration, TIME_UNIT, ms.NUM_CLIPS, outs, anchors, train,
                                                 window_start=(starts or [0] * len(items))[k])
        else:
            f, m, maps = ref.sampling_item(feats, gt, duration, ms.NUM_CLIPS, outs, anchors)
        prepared.append((words, torch.ones(len(words), 1, dtype=torch.float64), f, m, maps))
    return ref.collate(prepared, dtype=torch.float64)


def assert_same_gradients(ours, reference, loss, expected):
    ours.zero_grad(), reference.zero_grad()
    loss.backward(), expected.backward()
    grads = dict(reference.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, grads[name].grad, rtol=1e-7, atol=1e-9, msg=lambda m: f"{name}: {m}")


def run_both(ours, reference, cfg, items, train, starts=None):
    """(our output, loss), (reference predictions, masks, loss), training mode or not."""
    ours.train(train), reference.train(train)
    batch = our_batch(cfg, items, starts if train else None)
    output = ours(batch["feats"].double(), batch["queries"].double(), batch["wordlens"], None,
                  **({"clip_counts": batch["clip_counts"]} if "clip_counts" in batch else {}))
    loss = ours.losses(output, batch)["loss"]
    words, txt_mask, feats, vis_mask, targets = reference_batch(cfg, items, train, starts)
    predictions, masks = reference(words, txt_mask, feats, vis_mask)
    ms = cfg.MODEL.MS_TAN.LOSS
    expected = ref.total_loss(predictions, masks, targets, ms.MIN_IOU, ms.MAX_IOU, ms.BIAS)
    return (output, loss, batch), (predictions, masks, expected)


VARIANTS = [dict(), dict(prop="pool", maps="conv"), dict(kernel=2, window=32), dict(layers=(8,))]


@pytest.mark.parametrize("variant", VARIANTS, ids=["gated", "pool+conv", "clip-stride-2", "one-scale"])
def test_sliding_windows_losses_gradients_and_scores_equal_ms2dtans_arithmetic(tmp_path, variant):
    cfg = tiny_config(tmp_path, **variant)
    ours, reference = shared_models(cfg)
    window = cfg.MODEL.MS_TAN.NUM_CLIPS
    # a long video in a window from row 7, one exactly a window, one shorter (padded)
    items = videos([window + 14, window, window - 5])
    (output, loss, _), (predictions, masks, expected) = run_both(ours, reference, cfg, items, True, [7, 0, 0])
    for z, m, p, rm in zip(ours.scores(output), output.masks, predictions, masks):
        torch.testing.assert_close(m.double(), rm[:, 0])
        torch.testing.assert_close(z.double(), p[:, 0], rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(loss, expected, rtol=1e-10, atol=1e-12)
    assert_same_gradients(ours, reference, loss, expected)
    for name, value in reference.state_dict().items():  # batch norm's running statistics
        torch.testing.assert_close(ours.state_dict()[name], value, msg=name)

    # evaluation: whole videos of three lengths in one batch, proposals and the table
    items = videos([window + 9, window + 3, window - 5], seed=1)
    with torch.no_grad():
        (output, loss, batch), (predictions, masks, expected) = run_both(ours, reference, cfg, items, False)
    torch.testing.assert_close(loss, expected, rtol=1e-10, atol=1e-12)  # the reference's test loss too
    joined = ref.recover_to_single_map(predictions)
    assert_same_evaluation(cfg, ours, output, batch, joined, ref.recover_to_single_map(masks), items)


def assert_same_evaluation(cfg, ours, output, batch, joined, joined_mask, items):
    ms = cfg.MODEL.MS_TAN
    scores = ours.score_map(output, batch["durations"])
    torch.testing.assert_close(scores.values.double(), joined[:, 0].float().double(), rtol=1e-6, atol=1e-7)
    kept, _, filled = top_candidates(ours.candidates(output, batch["durations"]), cfg.TEST.NMS_THRESH)
    if ms.SLIDING_WINDOW:
        unit = ref.proposal_time_unit(TIME_UNIT, ms.NUM_CLIPS, [ms.NUM_CLIPS // ms.CLIP_MODULE.STRIDE])
        expected = ref.sliding_window_proposals(joined.float(), joined_mask, unit, cfg.TEST.NMS_THRESH)
    else:
        expected = ref.duration_proposals(joined.float(), joined_mask, [it[2] for it in items], cfg.TEST.NMS_THRESH)
    for row, proposals in enumerate(expected):
        assert filled[row].sum() == len(proposals)
        assert kept[row][filled[row]].tolist() == proposals  # the same moments, bit for bit, in order
    table = ref.evaluate(expected, [list(it[1]) for it in items], TIOUS, RECALLS)
    ours_table = evaluate_moments(kept, filled, batch["moments"])
    for i, t in enumerate(TIOUS):
        for j, r in enumerate(RECALLS):
            assert ours_table[f"R@{r},IoU@{t}"] == pytest.approx(100 * table["ranks"][i, j], abs=1e-9)
    assert ours_table["mIoU"] == pytest.approx(100 * table["mIoU"], abs=1e-5)


def test_sampled_clips_losses_and_scores_equal_ms2dtans_arithmetic(tmp_path):
    """SLIDING_WINDOW False (its ActivityNet experiments): the middle row of each bucket,
    targets over the annotated duration, proposals in fractions of it."""
    cfg = tiny_config(tmp_path, sliding=False)
    ours, reference = shared_models(cfg)
    items = videos([40, 23, 9])  # more rows, fewer, and fewer than NUM_CLIPS (rows repeat)
    (output, loss, _), (predictions, masks, expected) = run_both(ours, reference, cfg, items, True)
    torch.testing.assert_close(loss, expected, rtol=1e-10, atol=1e-12)
    assert_same_gradients(ours, reference, loss, expected)
    with torch.no_grad():
        (output, _, batch), (predictions, masks, _) = run_both(ours, reference, cfg, items, False)
    assert_same_evaluation(cfg, ours, output, batch, ref.recover_to_single_map(predictions),
                           ref.recover_to_single_map(masks), items)


def test_sampling_and_normalisation_are_the_references_bit_for_bit():
    for rows, clips in [(40, 16), (16, 16), (9, 16), (1000, 64), (65, 64)]:
        feats = torch.arange(rows, dtype=torch.float32)[:, None]
        assert middle_rows(rows, clips).tolist() == ref.feature_temporal_sampling(clips, feats)[:, 0].long().tolist()
    from tan.modeling.ms2dtan.clips import MiddleRowClips, WindowClips
    feats = np.random.default_rng(0).normal(size=(300, 1024)).astype(np.float32)
    expected = ref.video_features(torch.from_numpy(feats))[0]
    assert torch.equal(torch.from_numpy(WindowClips(16).base(feats)), expected)  # its float32 rounding, bit for bit
    assert torch.equal(torch.from_numpy(MiddleRowClips(64).base(feats)), ref.feature_temporal_sampling(64, expected))


def test_training_windows_are_drawn_from_the_seed_epoch_and_query(tmp_path):
    """A window start is a function of (SEED, epoch, query): a resumed run draws the same."""
    from tan.data.features.clip_inputs import NativeClips
    clips = NativeClips(16)
    base = np.zeros((40, 2), dtype=np.float32)
    draws = [clips.take(base, np.random.default_rng([0, epoch, 3]))[1] for epoch in range(6)]
    assert draws == [clips.take(base, np.random.default_rng([0, epoch, 3]))[1] for epoch in range(6)]
    assert len(set(draws)) > 1 and all(0 <= d < 40 - 16 for d in draws)
    assert clips.take(base, None)[1:] == (0, 40)  # evaluation: the whole video
    assert clips.take(base[:10], None)[0].shape == (16, 2)  # a short one padded to the window


# An experiment file laid out as MS-2D-TAN's are (experiments/charades/*.yaml), key for key.
FOLDERS = {"charades": "Charades-STA", "tacos": "TACoS"}


def experiment(dataset="charades", scales=(64, 32, 16), anchors=(16, 16, 16), layers=(16, 8, 8), clip_input=1024,
               window=64, prop="MultiScalePropConvTanhBN", maps="MapGatedConv", kernel=17, time_unit=0.64,
               vis="charades_i3d_rgb_25fps", hidden=512):
    return {
        "WORKERS": 16, "MODEL_DIR": "./checkpoints", "RESULT_DIR": "./results", "LOG_DIR": "./log",
        "DATASET": {"NAME": dataset, "DATA_DIR": f"data/{FOLDERS[dataset]}", "VIS_INPUT_TYPE": vis,
                    "TXT_INPUT_TYPE": "glove",
                    "NO_VAL": True, "NO_TEST": False, "INPUT_NUM_CLIPS": window, "OUTPUT_NUM_CLIPS": list(scales),
                    "NUM_ANCHORS": list(anchors), "TIME_UNIT": time_unit, "SLIDING_WINDOW": True},
        "CUDNN": {"DETERMINISTIC": False, "BENCHMARK": True},
        "OPTIM": {"NAME": "Adam", "PARAMS": {"LR": 0.0001}},
        "TRAIN": {"BATCH_SIZE": 32, "MAX_EPOCH": 100, "CONTINUE": False},
        "LOSS": {"NAME": "bce_rescale_loss", "PARAMS": {"MIN_IOU": 0.5, "MAX_IOU": 1.0, "BIAS": 0.0, "TEMPERATURE": 1.0}},
        "TEST": {"BATCH_SIZE": 32, "RECALL": [1, 5], "TIOU": [0.5, 0.7], "NMS_THRESH": 0.49},
        "MODEL": {
            "NAME": "MultiScale_TAN", "PARAMS": {"NUM_SCALES": len(layers)}, "CHECKPOINT": "release/epoch0039.pkl",
            "CLIP_MODULE": {"NAME": "ClipAvgPool", "PARAMS": {"INPUT_SIZE": clip_input, "HIDDEN_SIZE": hidden,
                                                               "KERNEL_SIZE": 1, "STRIDE": 1}},
            "PROP_MODULE": {"NAME": prop, "PARAMS": {"HIDDEN_SIZE": hidden, "NUM_LAYERS": list(layers)}},
            "FUSION_MODULE": {"NAME": "MulNormFusion", "PARAMS": {
                "HIDDEN_SIZE": hidden, "VIS_INPUT_SIZE": hidden, "TXT_INPUT_SIZE": 300, "TXT_HIDDEN_SIZE": hidden,
                "TXT_ENCODER": {"NAME": "LSTM", "NUM_LAYERS": 3, "BIDIRECTIONAL": True}}},
            "MAP_MODULE": {"NAME": maps, "PARAMS": {"INPUT_SIZE": hidden, "HIDDEN_SIZES": [hidden, hidden],
                                                     "KERNEL_SIZES": [kernel, kernel], "STRIDES": [1, 1],
                                                     "PADDINGS": [kernel // 2] * 2, "DILATIONS": [1, 1]}},
            "PRED_MODULE": {"NAME": "ProposalHead", "PARAMS": {"INPUT_SIZE": hidden}}}}


EXPERIMENTS = {
    "MS-2D-TAN-G-I3D.yaml": experiment(),
    "MS-2D-TAN-G-C3D-H512N512K5A8k9L2.yaml": experiment("tacos", (512, 256, 128, 64, 32), (8,) * 5, (8, 4, 4, 4, 4),
                                                        4096, 512, kernel=9, time_unit=1, vis="tacos_c3d_fc6_nonoverlap"),
    "DS-2D-TAN-C-C3D.yaml": experiment(scales=(64,), anchors=(64,), layers=(64,), clip_input=4096, maps="Conv",
                                       time_unit=1, vis="charades_c3d_fc6_nonoverlap"),
}


def convert(tmp_path, name, data):
    source = tmp_path / name
    source.write_text(yaml.safe_dump(data))
    out = tmp_path / (name + ".tan.yaml")
    from tan_apps.commands.convert_config import main
    main([str(source), "--out", str(out), "--data-root", str(tmp_path / "data")])
    return out


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_its_experiment_files_convert_and_give_its_state_dict(tmp_path, name):
    """tests/fixtures/ms2dtan_state_dict.json lists the names and shapes of its
    MultiScale_TAN for three experiments, derived from its own model code."""
    table = json.loads((open(os.path.join(FIXTURES, "ms2dtan_state_dict.json")).read()))[name]
    cfg = load_config(str(convert(tmp_path, name, EXPERIMENTS[name])))
    with torch.device("meta"):
        model = build_model(cfg)
    assert [[k, list(v.shape)] for k, v in model.state_dict().items()] == table
    assert cfg.TEST.NMS_THRESH == 0.49 and cfg.SOLVER.LR == 0.0001 and cfg.SOLVER.BATCH_SIZE == 32
    assert cfg.DATASETS.TRAIN[0].startswith("ms2dtan_") and list(cfg.DATASETS.VAL) == []
    assert cfg.DATASETS.ROOT == str(tmp_path / "data") and not cfg.DATASETS.CATALOG


def test_a_file_it_cannot_run_is_refused_and_nothing_is_written(tmp_path):
    data = experiment(prop="SparsePropConv")
    with pytest.raises(TanError, match="PROP_MODULE.NAME"):
        convert(tmp_path, "bad.yaml", data)
    data = experiment(scales=(64, 32, 8))
    with pytest.raises(TanError, match="OUTPUT_NUM_CLIPS"):
        convert(tmp_path, "bad.yaml", data)
    data = experiment()
    del data["MODEL"]["MAP_MODULE"]["PARAMS"]["HIDDEN_SIZES"]
    with pytest.raises(TanError, match="reference, but key 'MODEL.MAP_MODULE.PARAMS.HIDDEN_SIZES' is missing"):
        convert(tmp_path, "bad.yaml", data)
    data = experiment()
    del data["DATASET"]["OUTPUT_NUM_CLIPS"]
    with pytest.raises(TanError, match=re.escape("DATASET.OUTPUT_NUM_CLIPS is missing; its code reads it, and the "
                                                 "model's layers give [64, 32, 16]")):
        convert(tmp_path, "bad.yaml", data)
    data = experiment()
    data["DATASET"]["INPUT_NUM_CLIPS"] = "lots"
    with pytest.raises(TanError, match="reference, but invalid literal"):
        convert(tmp_path, "bad.yaml", data)
    with pytest.raises(TanError, match="no registered model recognises this experiment file"):
        convert(tmp_path, "other.yaml", {"MODEL": {"NAME": "SomethingElse"}})
    assert not list(tmp_path.glob("*.tan.yaml"))
    cfg = tiny_config(tmp_path)
    cfg.defrost()
    with pytest.raises(TanError, match="NUM_LAYERS"):
        load_config(str(tmp_path / "ms.yaml"), ["MODEL.MS_TAN.PROP_MODULE.NUM_LAYERS", "[4, 3, 2]"])
    with pytest.raises(TanError, match="PADDINGS"):
        load_config(str(tmp_path / "ms.yaml"), ["MODEL.MS_TAN.MAP_MODULE.PADDINGS", "[1, 1]"])


def reference_charades(root, synthetic_root, videos=40):
    """The first synthetic test videos written as MS-2D-TAN's Charades-STA folder keeps them
    (charades_sta_test.txt, Charades_v1_test.csv, an HDF5 of features, GloVe in .vector_cache),
    their sentences as they are ("after that, a man ...": its words split at white space).
    Returns its queries as its loader reads them: (video, [start, end], duration, sentence)."""
    import h5py
    import shutil
    annotations = json.load(open(os.path.join(synthetic_root, "synthetic", "annotations", "test.json")))
    folder = root / "Charades-STA"
    (folder / ".vector_cache").mkdir(parents=True)
    shutil.copy(os.path.join(synthetic_root, "synthetic", "word_vectors.txt"),
                folder / ".vector_cache" / "glove.6B.300d.txt")
    queries, lines, lengths = [], [], ["id,length"]
    with h5py.File(os.path.join(synthetic_root, "synthetic", "features", "synthetic_features.hdf5"), "r") as src, \
            h5py.File(folder / "charades_i3d_rgb_25fps.hdf5", "w") as dst:
        for video in list(annotations)[:videos]:
            entry = annotations[video]
            dst[video] = src[video][:]
            lengths.append(f"{video},{entry['duration']}")
            for (start, end), sentence in zip(entry["timestamps"], entry["sentences"]):
                lines.append(f"{video} {start} {end}##{sentence}")
                # its reader cuts the line at ".\n": the final period goes, a comma stays on its word
                read = sentence[:-1] if sentence.endswith(".") else sentence
                queries.append((video, [start, min(end, entry["duration"])], entry["duration"], read))
    (folder / "charades_sta_test.txt").write_text("\n".join(lines) + "\n")
    (folder / "Charades_v1_test.csv").write_text("\n".join(lengths) + "\n")
    return queries


def its_evaluation(model, queries, root, window, batch_size=32):
    """Its test: queries sorted by duration (longest first), batches of its collate, whole
    videos, proposals of the joined map and its table; word vectors of its whitespace split."""
    import h5py
    vectors = {}
    for line in open(root / "Charades-STA" / ".vector_cache" / "glove.6B.300d.txt"):
        word, *values = line.rstrip().split(" ")
        vectors[word] = torch.tensor([float(v) for v in values])
    order = sorted(range(len(queries)), key=lambda q: queries[q][2], reverse=True)
    segments = {}
    model.eval()
    with h5py.File(root / "Charades-STA" / "charades_i3d_rgb_25fps.hdf5", "r") as features, torch.no_grad():
        for first in range(0, len(order), batch_size):
            items = []
            for q in order[first:first + batch_size]:
                video, gt, duration, sentence = queries[q]
                words = torch.stack([vectors.get(w.lower(), torch.zeros(300)) for w in sentence.split()])
                feats, mask, maps = ref.sliding_window_item(torch.from_numpy(features[video][:]).float(), gt, duration,
                                                            TIME_UNIT, window, [window], [8], train=False)
                items.append((words, torch.ones(len(words), 1), feats, mask, maps))
            words, txt_mask, feats, vis_mask, _ = ref.collate(items)
            predictions, masks = model(words, txt_mask, feats, vis_mask)
            joined, joined_mask = ref.recover_to_single_map(predictions), ref.recover_to_single_map(masks)
            unit = ref.proposal_time_unit(TIME_UNIT, window, [window])
            for q, proposals in zip(order[first:first + batch_size],
                                    ref.sliding_window_proposals(joined, joined_mask, unit, 0.49)):
                segments[q] = proposals
    return ref.evaluate([segments[q] for q in range(len(queries))], [q[1] for q in queries], TIOUS, RECALLS)


@pytest.mark.slow
def test_a_checkpoint_in_its_release_layout_gives_its_numbers_through_tan_test(tmp_path, synthetic_root):
    """An experiment file and a bare state dict (.pkl, as its run.py saves) of its model, on data in
    its Charades-STA layout: tan-test's table equals the one its evaluation computes."""
    data = tmp_path / "data"
    queries = reference_charades(data, synthetic_root)
    window = 32
    source = experiment(scales=(32, 16, 8), anchors=(8, 8, 8), layers=(8, 4, 4), clip_input=128, window=window,
                        kernel=5, time_unit=TIME_UNIT, hidden=32)
    config = convert(tmp_path, "MS-2D-TAN-G-I3D.yaml", source)
    torch.manual_seed(3)
    reference = ref.ReferenceMS2DTAN(input_size=128, hidden_size=32, num_layers=[8, 4, 4], txt_input_size=300,
                                     txt_hidden_size=32, txt_layers=3, txt_bidirectional=True,
                                     map_hidden_sizes=[32, 32], map_kernel_sizes=[5, 5], map_paddings=[2, 2])
    for module in reference.modules():  # trained-looking batch-norm statistics
        if isinstance(module, torch.nn.BatchNorm1d):
            module.running_mean.uniform_(-0.1, 0.1), module.running_var.uniform_(0.5, 2.0)
    checkpoint = tmp_path / "epoch0039-0.5664-0.8825.pkl"
    torch.save(reference.state_dict(), checkpoint)
    proc = run_main("test_net", "--config-file", str(config), "--ckpt", str(checkpoint),
                    "OUTPUT_DIR", str(tmp_path / "out"), "MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [metrics] = list((tmp_path / "out").rglob("metrics.json"))
    ours = json.loads(metrics.read_text())
    assert ours["num_queries"] == len(queries)
    expected = its_evaluation(reference, queries, data, window)
    for i, t in enumerate(TIOUS):
        for j, r in enumerate(RECALLS):
            assert ours[f"R@{r},IoU@{t}"] == pytest.approx(100 * expected["ranks"][i, j], abs=1e-9), (r, t)
    assert ours["mIoU"] == pytest.approx(100 * expected["mIoU"], abs=1e-4)


def test_cells_of_exactly_equal_score_rank_by_the_lower_flat_index_whatever_shares_the_batch():
    """A trained map has exact ties (a dead-ReLU cell scores sigmoid(bias) exactly): the earlier start, then
    the shorter cell comes first, and suppresses the other when they overlap; its reference's torch.topk
    leaves that order undefined (docs/ms2dtan.md §10)."""
    from tan.modeling.ms2dtan.layout import joined_candidates, window_seconds

    n, unit, tie = 16, 0.5, 0.47917336225509644
    valid = torch.ones(n, n, dtype=torch.bool).triu()  # any cells will do for the order
    seconds = window_seconds(n, unit, "cpu")
    scores = torch.rand(2, n, n, generator=torch.Generator().manual_seed(0)) * 0.4
    scores[0, 7, 13] = scores[0, 7, 12] = scores[0, 2, 3] = tie  # [3.5, 10.5] and [3.5, 10.0] overlap by 13/14
    alone, _, _ = top_candidates(joined_candidates(scores[:1] * valid, valid, seconds), 0.49)
    batched, kept, _ = top_candidates(joined_candidates(scores * valid, valid, seconds), 0.49)
    assert alone[0, 0].tolist() == [1.0, 3.0]  # cell (2, 3): the earliest start among the tied cells
    assert alone[0, 1].tolist() == [3.5, 10.0]  # (7, 12) before (7, 13), which it suppresses
    assert [3.5, 10.5] not in alone[0].tolist() and kept[0, :2].tolist() == [tie, tie]
    assert torch.equal(alone[0], batched[0])


def test_every_key_its_file_leaves_out_is_named_by_its_path_or_takes_its_codes_default(tmp_path):
    """Each key of an experiment file removed in turn: it converts (the key has a default in its code),
    or the error names the key by its whole path and says it is missing, never showing None, an empty
    text, a number standing in for it or the section around it."""
    # without MODEL.NAME the file is no MS-2D-TAN file (a test above)
    assert not unclear_messages(experiment(), lambda data: convert(tmp_path, "bad.yaml", data),
                                keep={("MODEL", "NAME")})
