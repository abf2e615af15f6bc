"""tan-check-data on datasets with known faults: every fault is reported under
its own reason, the counts are training's, and the exit status says whether
training could start."""
import json

import numpy as np
import pytest
import yaml

from conftest import SYNTHETIC_CONFIG, run_main

CLIP, SLOWFAST, TEXT = 6, 4, 5


def write_npz(path, key, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{key: array.astype(np.float16)})


def jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")


def query(qid, vid, windows, sentence="the person opens the door"):
    return {"qid": qid, "query": sentence, "vid": vid, "duration": 20.0, "relevant_windows": windows}


@pytest.fixture
def faulty(tmp_path):
    """Dataset "faulty": faults that drop queries but let training start. Dataset "broken":
    faults that stop it (a video of another width, streams of disagreeing lengths)."""
    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    (root / "slowfast").mkdir(parents=True)
    for v in range(6):
        write_npz(root / "clip" / f"v{v}.npz", "features", rng.normal(size=(20, CLIP)))
        if v != 5:  # v5 lacks its second stream (a folder of .npy files, one row shorter)
            np.save(root / "slowfast" / f"v{v}.npy", rng.normal(size=(19, SLOWFAST)).astype(np.float32))
    nan = rng.normal(size=(20, CLIP))
    nan[3, 2] = np.nan
    write_npz(root / "clip" / "v6.npz", "features", nan)  # v6: a NaN in its first stream
    np.save(root / "slowfast" / "v6.npy", rng.normal(size=(19, SLOWFAST)).astype(np.float32))
    records = [query(0, "v0", [[1, 4]]), query(1, "v1", [[2, 5], [12, 16]]),  # two windows
               query(2, "v2", [[15, 25]]),  # clipped to the video
               query(3, "v5", [[1, 2]]),  # v5 has one stream only
               query(4, "v9", [[1, 2]]),  # no features at all
               "{not json", query(5, "v3", [[1, 2]]),  # no sentence features written for qid 5
               {"qid": 6, "query": "x", "vid": "v4", "duration": 20.0},  # no windows
               query(7, "v4", [[3, 6]]), query(8, "v6", [[2, 4]])]
    jsonl(root / "faulty.jsonl", records)
    for r in records:
        if isinstance(r, dict) and r["qid"] != 5:
            write_npz(root / "text" / f"qid{r['qid']}.npz", "last_hidden_state", rng.normal(size=(7, TEXT)))
    # broken: v0 of another width, v1's streams 20 and 8 rows long
    for v, (rows_a, width_a, rows_b) in {"v0": (20, CLIP + 1, 19), "v1": (20, CLIP, 8), "v2": (20, CLIP, 20)}.items():
        write_npz(root / "clip_b" / f"{v}.npz", "features", rng.normal(size=(rows_a, width_a)))
        write_npz(root / "slowfast_b" / f"{v}.npz", "features", rng.normal(size=(rows_b, SLOWFAST)))
    jsonl(root / "broken.jsonl", [query(i, f"v{i}", [[1, 3]]) for i in range(3)])
    for i in range(3):
        write_npz(root / "text_b" / f"qid{i}.npz", "last_hidden_state", rng.normal(size=(4, TEXT)))
    catalog = {"faulty": {"annotations": "faulty.jsonl", "format": "jsonl", "features": ["clip", "slowfast"],
                          "text_features": "text"},
               "broken": {"annotations": "broken.jsonl", "format": "jsonl", "features": ["clip_b", "slowfast_b"],
                          "text_features": "text_b"}}
    (root / "catalog.yaml").write_text(yaml.safe_dump(catalog))
    return root


def check(root, tmp_path, *datasets):
    opts = ["DATASETS.ROOT", str(root), "DATASETS.CATALOG", "catalog.yaml", "INPUT.SENTENCE_FEATURES", "True",
            "INPUT.PRE_QUERY_SIZE", str(TEXT), "MODEL.TAN.FEATPOOL.INPUT_SIZE", str(CLIP + SLOWFAST),
            "DATASETS.TRAIN", f"('{datasets[0]}',)", "DATASETS.VAL", "()",
            "DATASETS.TEST", "(" + "".join(f"'{d}'," for d in datasets[1:]) + ")"]
    report = tmp_path / "report.json"
    proc = run_main("check_data", "--config-file", SYNTHETIC_CONFIG, "--json", str(report), *opts)
    assert report.is_file(), proc.stdout + proc.stderr
    return proc, json.loads(report.read_text())


def test_the_checker_counts_each_fault_and_lets_training_start(faulty, tmp_path):
    proc, report = check(faulty, tmp_path, "faulty")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no problem found" in proc.stdout
    (faulty_report,) = report["datasets"]
    assert faulty_report["kept"] == 4  # qids 0, 1, 2, 7
    assert faulty_report["dropped"] == {"line not valid JSON": 1, "record without relevant_windows": 1,
                                        "window clipped to the video": 1,
                                        "video missing from the feature file": 2,
                                        "video with NaN or infinite features": 1,
                                        "query without sentence features": 1}
    assert faulty_report["without_features"] == ["v5", "v9"]
    clip, slowfast = faulty_report["streams"]
    assert faulty_report["unusable_features"] == {"video with NaN or infinite features": ["v6"]}
    assert (clip["widths"], slowfast["widths"]) == ({str(CLIP): 7}, {str(SLOWFAST): 6})  # videos per width
    assert clip["lengths"] == [20, 20, 20] and slowfast["lengths"] == [19, 19, 19]
    assert slowfast["missing"] == ["v5", "v9"] and clip["missing"] == ["v9"]
    assert "4 of 5 queries (80.0%) have a file" in faulty_report["text"]
    # the text report names each reason, and whether the query was kept
    assert "window clipped to the video (a window or moment, not a query)" in proc.stdout
    assert "query without sentence features (dropped)" in proc.stdout
    assert "8 in the annotations; 2 without features: v5, v9" in proc.stdout
    assert "1 left out, video with NaN or infinite features: v6" in proc.stdout


def test_the_checker_lists_every_fault_that_would_stop_training(faulty, tmp_path):
    proc, report = check(faulty, tmp_path, "faulty", "broken")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    problems = report["problems"]
    assert len(problems) == 2, problems
    assert "broken: " in problems[0] and "videos of different widths" in problems[0] and "clip_b" in problems[0]
    assert "1 videos whose streams' lengths differ" in problems[1] and "v1 (20/8 rows)" in problems[1]
    assert "2 problem(s) would stop training" in proc.stdout
    # the healthy dataset is still reported in full
    assert report["datasets"][0]["kept"] == 4


def test_a_width_that_is_not_the_configs_is_named_with_its_streams(faulty, tmp_path):
    root = faulty
    catalog = yaml.safe_load((root / "catalog.yaml").read_text())
    catalog["faulty"]["features"] = ["clip"]  # 6 wide, the config says 10
    (root / "catalog.yaml").write_text(yaml.safe_dump(catalog))
    proc, report = check(root, tmp_path, "faulty")
    assert proc.returncode == 1
    assert report["problems"] == ["faulty: feature width 6 (clip); the config expects 10 "
                                  "(MODEL.TAN.FEATPOOL.INPUT_SIZE)"]


def test_missing_files_are_reported_not_raised(faulty, tmp_path):
    (faulty / "faulty.jsonl").unlink()
    proc, report = check(faulty, tmp_path, "faulty")
    assert proc.returncode == 1
    assert "NOT FOUND" in proc.stdout and "faulty.jsonl" in report["problems"][0]


def test_a_missing_word_vector_file_does_not_hide_the_datasets_problems(faulty, tmp_path):
    catalog = yaml.safe_load((faulty / "catalog.yaml").read_text())
    catalog["faulty"]["features"] = ["clip"]  # 6 wide, the config says 10
    (faulty / "catalog.yaml").write_text(yaml.safe_dump(catalog))
    report = tmp_path / "report.json"
    proc = run_main("check_data", "--config-file", SYNTHETIC_CONFIG, "--json", str(report),
                    "DATASETS.ROOT", str(faulty), "DATASETS.CATALOG", "catalog.yaml", "INPUT.WORD_VECTORS", "no.txt",
                    "MODEL.TAN.FEATPOOL.INPUT_SIZE", "10", "DATASETS.TRAIN", "('faulty',)", "DATASETS.VAL", "()",
                    "DATASETS.TEST", "()")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    problems = json.loads(report.read_text())["problems"]
    assert len(problems) == 2 and "no.txt' not found" in problems[0] and "feature width 6 (clip)" in problems[1]
