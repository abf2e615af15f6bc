"""The real annotation files (data/annotations) and the stand-ins built from them;
and tools/benchmark.py's MS-2D-TAN workloads, ours beside the baseline computed its way."""
import json
import os
from collections import Counter

import numpy as np
import pytest
import torch

from tan.config import load_config
from tan.config.setup import merge_overrides
from tan.data import RunData, build_datasets
from tan.data.formats import load_annotations
from tan.evaluation import top_candidates
from tan.engine.step import forward_batch
from tan.errors import TanError
from tan_apps.standin import make_standin, write_charades_text_form

import benchmark
from benchmarking import ms2dtan_workloads as MS
from oracles import reference_ms2dtan as ref
from conftest import ANNOTATIONS, REPO, real_annotations

# (file, format): (queries in the file, queries kept, what was dropped or clipped)
EXPECTED = {
    ("tacos/train.json", "tacos"): (9790, 9790, {"moment clipped to the video": 43}),
    ("tacos/val.json", "tacos"): (4436, 4436, {}),
    ("tacos/test.json", "tacos"): (4001, 4001, {"moment clipped to the video": 5}),
    ("activitynet/train.json", "seconds"): (37421, 37417, {"moment clipped to the video": 261, "start >= end": 4}),
    ("activitynet/val.json", "seconds"): (17505, 17505, {"moment clipped to the video": 134}),
    ("activitynet/test.json", "seconds"): (17031, 17031, {"moment clipped to the video": 111}),
    ("charades_sta/charades_train.json", "seconds"): (12404, 12404, {}),
    ("charades_sta/charades_test.json", "seconds"): (3720, 3720, {}),
}


@pytest.mark.parametrize("name,fmt", sorted(EXPECTED))
def test_real_annotation_files_keep_and_drop_the_expected_queries(name, fmt):
    total, kept, dropped = EXPECTED[(name, fmt)]
    assert sum(len(v["sentences"]) for v in real_annotations(name).values()) == total
    queries, counts = load_annotations(os.path.join(ANNOTATIONS, name + ".gz"), fmt)  # read compressed
    assert len(queries) == kept and dict(counts) == dropped
    assert all(0 <= q.start < q.end <= q.duration for q in queries)
    assert all(q.sentence == q.sentence.strip() for q in queries)


def test_bad_activitynet_records_are_dropped_not_patched():
    # The reference reuses the previous record's values for a bad one; here it is gone.
    queries, _ = load_annotations(os.path.join(ANNOTATIONS, "activitynet/train.json.gz"), "seconds")
    data = real_annotations("activitynet/train.json")
    bad = {(v, s) for v, info in data.items() for (a, b), s in zip(info["timestamps"], info["sentences"])
           if min(b, info["duration"]) <= max(a, 0)}
    assert len(bad) == 4
    kept = {(q.video, q.sentence) for q in queries}
    assert not any((v, s.strip()) in kept for v, s in bad)


@pytest.fixture(scope="module")
def charades_standin(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("standin"))
    make_standin("charades", ANNOTATIONS, root, dim=16, clips_per_second=1.0)
    write_charades_text_form(root)
    return root


def charades_cfg(root, *opts):
    return load_config(os.path.join(REPO, "configs", "2dtan_16x16_pool_k5l8_charades.yaml"),
                       merge_overrides(["DATASETS.ROOT", root, "MODEL.TAN.FEATPOOL.INPUT_SIZE", "16"], opts))


def test_standin_loads_through_the_reference_config_at_full_scale(charades_standin):
    train, test = build_datasets(charades_cfg(charades_standin), ("charades_train", "charades_test"))
    assert (len(train), len(test)) == (12404, 3720)
    assert len(train.videos) == 5336 and train.unknown_words == 0
    item = train[0]
    assert item["feats"].shape == (256, 16) and item["query"].shape[1] == 300


def test_standin_moments_carry_their_sentence_signal(charades_standin):
    [train] = build_datasets(charades_cfg(charades_standin), ("charades_train",))
    inside, outside = [], []
    for index in range(0, 2000, 7):
        item = train[index]
        feats = train.features.read(train.videos[train.video_ids[index]])
        t = feats.shape[0]
        start, end = (item["moment"].numpy() / item["duration"] * t).astype(int)
        if end - start >= 2 and t - (end - start) >= 2:
            centre = feats.mean(axis=0)
            mask = np.zeros(t, bool)
            mask[start:end] = True
            inside.append(np.linalg.norm(feats[mask].mean(0) - centre))
            outside.append(np.linalg.norm(feats[~mask].mean(0) - centre))
    assert np.mean(inside) > 1.5 * np.mean(outside)


def test_charades_text_form_gives_the_same_queries_as_the_json(charades_standin):
    cfg = charades_cfg(charades_standin)
    json_set, txt_set = build_datasets(cfg, ("charades_test", "charades_txt_test"))
    assert len(json_set) == len(txt_set) == 3720
    np.testing.assert_allclose(np.sort(json_set.moments, axis=0), np.sort(txt_set.moments, axis=0), rtol=1e-6)
    assert Counter(json_set.sentences) == Counter(txt_set.sentences)


def test_charades_text_form_errors_and_bad_lines(tmp_path):
    (tmp_path / "a.txt").write_text("V1 0.0 3.5##a person opens a door.\nV2 1 2##no duration\nbroken line\n"
                                    "V1 5 1##reversed\n")
    (tmp_path / "c.csv").write_text("id,subject,length\nV1,x,10.0\n")
    queries, counts = load_annotations(str(tmp_path / "a.txt"), "charades_txt", str(tmp_path / "c.csv"))
    assert [(q.video, q.start, q.end, q.sentence) for q in queries] == [("V1", 0.0, 3.5, "a person opens a door.")]
    assert dict(counts) == {"video without a duration in the CSV": 1, "malformed line": 1, "start >= end": 1}
    with pytest.raises(Exception, match="Charades CSV file .*missing.csv.* not found"):
        load_annotations(str(tmp_path / "a.txt"), "charades_txt", str(tmp_path / "missing.csv"))


def test_word_vector_cache_is_reused_and_invalidated(charades_standin, caplog, tmp_path):
    import logging

    caplog.set_level(logging.INFO, logger="tan")
    cache = ["DATASETS.CACHE_DIR", str(tmp_path / "cache")]
    cfg = charades_cfg(charades_standin, "DATASETS.TEST", "('charades_test',)", "DATASETS.TRAIN", "()", *cache)
    data = RunData(cfg)
    vocabulary = data.text_input.vocabulary()
    assert "cached in" in caplog.text
    caplog.clear()
    assert data.text_input.vocabulary() is vocabulary and not caplog.text  # once per run
    # each run (a new RunData) reads the cache
    build_datasets(cfg, ("charades_test",))
    assert "read from the cache" in caplog.text
    caplog.clear()
    assert RunData(cfg).text_input.vocabulary().words == vocabulary.words
    assert "read from the cache" in caplog.text
    # another vocabulary (train sentences too) -> another cache entry
    caplog.clear()
    build_datasets(charades_cfg(charades_standin, *cache), ("charades_test",))
    assert "read from the cache" not in caplog.text and "cached in" in caplog.text
    assert len(os.listdir(tmp_path / "cache")) == 2
    # a changed source file -> read again
    glove = os.path.join(charades_standin, "glove", "glove.840B.300d.txt")
    os.utime(glove, (1, 1))
    caplog.clear()
    RunData(cfg).text_input.vocabulary()
    assert "read from the cache" not in caplog.text


def test_missing_word_vector_file_names_the_path_and_what_to_put_there(charades_standin):
    from tan.errors import TanError

    cfg = charades_cfg(charades_standin, "INPUT.WORD_VECTORS", "glove/nothing.txt")
    with pytest.raises(TanError, match="nothing.txt.*not found.*GloVe text file"):
        build_datasets(cfg, ("charades_test",))


# ------------------------------------------------------------- tools/benchmark.py on MS_TAN

MS_SYNTHETIC = os.path.join(REPO, "configs", "ms2dtan_synthetic.yaml")
MS_TINY = ["MODEL.MS_TAN.NUM_CLIPS", "64", "MODEL.MS_TAN.PROP_MODULE.NUM_LAYERS", "[4, 2, 2]",
           "MODEL.MS_TAN.CLIP_MODULE.INPUT_SIZE", "32", "INPUT.PRE_QUERY_SIZE", "24",
           "MODEL.MS_TAN.CLIP_MODULE.HIDDEN_SIZE", "16", "MODEL.MS_TAN.FUSION_MODULE.TXT_HIDDEN_SIZE", "16",
           "MODEL.MS_TAN.MAP_MODULE.HIDDEN_SIZES", "[16, 16]", "MODEL.MS_TAN.MAP_MODULE.KERNEL_SIZES", "[3, 3]",
           "MODEL.MS_TAN.MAP_MODULE.PADDINGS", "[1, 1]"]


def test_ms2dtan_benchmark_runs_on_cpu_and_reports_ours_beside_the_baseline(tmp_path, capsys):
    out = tmp_path / "ms.json"
    benchmark.main(["--config-file", MS_SYNTHETIC, "--preset", "cpu-small", "--device", "cpu", "--batch", "2",
                    "--steps", "1", "--warmup", "0", "--only", "train,inference,eval", "--eval-queries", "16",
                    "--reference-eval-queries", "8", "--json", str(out), *MS_TINY])
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["architecture"] == "MS_TAN" and list(report["results"]) == ["ours", "reference"]
    for impl, figures in report["results"].items():
        for key in ("train_samples_per_s", "train_peak_memory_gb", "inference_samples_per_s", "eval_ms_per_query"):
            assert figures[key] > 0, (impl, key)
    for label in ("train samples/s", "inference samples/s", "evaluation ms/query"):
        [line] = [x for x in printed.splitlines() if x.startswith(label)]
        assert len(line.split()) == len(label.split()) + 3, line  # ours, reference, speed-up
    assert "model: MS_TAN" in printed and "re-encodes the sentence" in printed


def test_ms2dtan_workloads_give_both_sides_the_same_computation():
    """The benchmark's batches through each side's data path: the same training loss, the
    same joined test scores and the same top 5 (float64, the reference with our weights; raw
    features, so that both read the same numbers)."""
    opts = merge_overrides(benchmark.preset_overrides("cpu-small", "MS_TAN"), MS_TINY, ["MODEL.MS_TAN.NORMALIZE", "False"])
    cfg = benchmark.load_config(MS_SYNTHETIC, opts)
    device = torch.device("cpu")
    batches = MS.random_batches(cfg, 5, device, seed=1)
    train, test, window = batches["train"]["ours"], batches["test"]["ours"], cfg.MODEL.MS_TAN.NUM_CLIPS
    assert train["clip_offsets"].max() > 0 and train["clip_counts"].min() < window  # windows, and a padded video
    assert test["feats"].shape[1] > window and test["clip_counts"].tolist() == sorted(test["clip_counts"].tolist(),
                                                                                       reverse=True)
    ours, reference = (MS.build(cfg, impl, device).double() for impl in ("ours", "reference"))
    loss = cfg.MODEL.MS_TAN.LOSS
    for split, training in (("train", True), ("test", False)):
        ours.train(training), reference.train(training)
        batch = {k: v.double() if v.is_floating_point() else v for k, v in batches[split]["ours"].items()}
        words, txt_mask, feats, vis_mask, targets = (
            [t.double() for t in x] if isinstance(x, list) else x.double() for x in batches[split]["reference"])
        with torch.no_grad():
            output = forward_batch(ours, batch)
            predictions, masks = reference(words, txt_mask, feats, vis_mask)
        expected = ref.total_loss(predictions, masks, targets, loss.MIN_IOU, loss.MAX_IOU, loss.BIAS)
        torch.testing.assert_close(ours.losses(output, batch)["loss"], expected, rtol=1e-9, atol=1e-12)
    joined = ref.recover_to_single_map(predictions)
    scores = ours.score_map(output, batch["durations"]).values
    torch.testing.assert_close(scores.double(), joined[:, 0].float().double(), rtol=1e-6, atol=1e-7)
    kept, _, filled = top_candidates(ours.candidates(output, batch["durations"]), cfg.TEST.NMS_THRESH)
    proposals = MS.reference_proposals(cfg, [p.float() for p in predictions], masks, batches["test"]["durations"])
    # the same moments; equal float32 scores may come in another order (its top-k breaks no ties)
    assert [sorted(k[f].tolist()) for k, f in zip(kept, filled)] == [sorted(p) for p in proposals]


def test_a_compressed_annotation_file_reads_as_the_plain_one_and_a_cut_one_is_named(tmp_path):
    compressed = os.path.join(ANNOTATIONS, "tacos", "val.json.gz")
    plain = tmp_path / "val.json"
    plain.write_text(json.dumps(real_annotations("tacos/val.json")))
    assert load_annotations(compressed, "tacos") == load_annotations(str(plain), "tacos")
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(open(compressed, "rb").read()[:5000])
    with pytest.raises(TanError, match=f"annotation file '{cut}' cannot be read: Compressed file ended"):
        load_annotations(str(cut), "tacos")
