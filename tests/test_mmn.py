"""MMN and the convolutional 2D map, unit by unit: MMN's config keys, its
state-dict names, the loss against a hand computation and against MMN's own
arithmetic (tests/oracles/reference_mmn.py), the test score, the conv
map, the row strips under batch norm, the video batches and DistilBERT."""
import json
import math
import os

import pytest
import torch
import yaml

from tan.config import load_config
from tan.data.collate import VideoBatchCollator
from tan.errors import TanError
from tan.modeling import build_model
from tan.modeling.map2d.feat2d import SparseConv2D, build_mask2d
from tan.modeling.mmn.model import MMNOutput, CellEmbeddings
from tan.modeling.mmn.loss import MutualMatchingLoss

from conftest import REPO
from oracles.reference_mmn import ChainMap2D, ReferenceMMN, to_mmn_batch, total_loss

MMN_SYNTHETIC = os.path.join(REPO, "configs", "mmn_synthetic.yaml")
FIXTURES = os.path.join(REPO, "tests", "fixtures")

# The keys and values of MMN's three YAML files (MCG-NJU/MMN configs/), per benchmark: the shape of its files.
MMN_FILES = {
    "tacos": dict(clips=128, counts=[15, 8, 8, 8], input=4096, kernel=2, pk=5, layers=8, iou=(0.3, 0.7), pos=3,
                  margin=0.1, weight=0.1, pre=256, workers=12, lr=0.0015, batch=4, milestones="(130, 190)",
                  epochs=250, period=10, resume=101, freeze=40, only_iou=100, skip=0, nms=0.4, test_batch=16,
                  pow=0.3),
    "activitynet": dict(clips=64, counts=[15, 8, 8], input=500, kernel=4, pk=9, layers=4, iou=(0.5, 1.0), pos=1,
                        margin=0.3, weight=0.1, pre=256, workers=16, lr=0.0008, batch=48, milestones="(7, 15)",
                        epochs=18, period=1, resume=6, freeze=4, only_iou=6, skip=3, nms=0.5, test_batch=48,
                        pow=0.5),
    "charades": dict(clips=16, counts=[15], input=4096, kernel=2, pk=5, layers=8, iou=(0.5, 1.0), pos=1,
                     margin=0.4, weight=0.05, pre=32, workers=16, lr=0.0001, batch=48, milestones="(8, 13)",
                     epochs=18, period=1, resume=7, freeze=4, only_iou=7, skip=0, nms=0.5, test_batch=48, pow=0.5),
}


def mmn_yaml(name, v):
    """A config file laid out as MMN's are, key for key."""
    data = {
        "MODEL": {"ARCHITECTURE": "MMN", "MMN": {
            "NUM_CLIPS": v["clips"], "JOINT_SPACE_SIZE": 256,
            "FEATPOOL": {"INPUT_SIZE": v["input"], "HIDDEN_SIZE": 512, "KERNEL_SIZE": v["kernel"]},
            "FEAT2D": {"NAME": "pool", "POOLING_COUNTS": v["counts"]}, "TEXT_ENCODER": {"NAME": "BERT"},
            "PREDICTOR": {"HIDDEN_SIZE": 512, "KERNEL_SIZE": v["pk"], "NUM_STACK_LAYERS": v["layers"]},
            "LOSS": {"MIN_IOU": v["iou"][0], "MAX_IOU": v["iou"][1], "NUM_POSTIVE_VIDEO_PROPOSAL": v["pos"],
                     "NEGATIVE_VIDEO_IOU": 0.5, "SENT_REMOVAL_IOU": 0.5, "TAU_VIDEO": 0.1, "TAU_SENT": 0.1,
                     "MARGIN": v["margin"], "CONTRASTIVE_WEIGHT": v["weight"]}}},
        "DATASETS": {"NAME": name, "TRAIN": f"('{name}_train',)", "TEST": f"('{name}_test',)"},
        "INPUT": {"NUM_PRE_CLIPS": v["pre"]}, "DATALOADER": {"NUM_WORKERS": v["workers"]},
        "SOLVER": {"LR": v["lr"], "BATCH_SIZE": v["batch"], "MILESTONES": v["milestones"], "MAX_EPOCH": v["epochs"],
                   "TEST_PERIOD": v["period"], "CHECKPOINT_PERIOD": v["period"], "RESUME": False,
                   "RESUME_EPOCH": v["resume"], "FREEZE_BERT": v["freeze"], "ONLY_IOU": v["only_iou"],
                   "SKIP_TEST": v["skip"]},
        "TEST": {"NMS_THRESH": v["nms"], "BATCH_SIZE": v["test_batch"], "CONTRASTIVE_SCORE_POW": v["pow"]},
    }
    return yaml.safe_dump(data)


@pytest.mark.parametrize("name", sorted(MMN_FILES))
def test_mmn_yaml_files_load_unchanged(tmp_path, name):
    path = tmp_path / f"pool_{name}.yaml"
    path.write_text(mmn_yaml(name, MMN_FILES[name]))
    cfg = load_config(str(path))
    v = MMN_FILES[name]
    assert cfg.MODEL.ARCHITECTURE == "MMN" and cfg.DATASETS.NAME == name
    assert cfg.MODEL.MMN.NUM_CLIPS == v["clips"] and list(cfg.MODEL.MMN.FEAT2D.POOLING_COUNTS) == v["counts"]
    assert cfg.MODEL.MMN.LOSS.NUM_POSTIVE_VIDEO_PROPOSAL == v["pos"] and cfg.SOLVER.ONLY_IOU == v["only_iou"]
    assert cfg.TEST.CONTRASTIVE_SCORE_POW == v["pow"] and cfg.SOLVER.FREEZE_BERT == v["freeze"]
    # our own configs for the three benchmarks carry MMN's settings
    ours = {"tacos": "mmn_128x128_pool_k5l8_tacos", "activitynet": "mmn_64x64_pool_k9l4_activitynet",
            "charades": "mmn_16x16_pool_k5l8_charades"}[name]
    mine = load_config(os.path.join(REPO, "configs", f"{ours}.yaml"))
    for key in ("NUM_CLIPS", "FEATPOOL", "FEAT2D", "PREDICTOR", "LOSS", "TEXT_ENCODER.NAME"):
        node_a, node_b = cfg.MODEL.MMN, mine.MODEL.MMN
        for part in key.split("."):
            node_a, node_b = node_a[part], node_b[part]
        if isinstance(node_b, dict):
            node_b = {k: v for k, v in node_b.items() if k != "STRIP_ROWS"}
            node_a = {k: v for k, v in node_a.items() if k != "STRIP_ROWS"}
        assert node_a == node_b, key
    for key in ("LR", "BATCH_SIZE", "MILESTONES", "MAX_EPOCH", "FREEZE_BERT", "ONLY_IOU", "SKIP_TEST"):
        assert cfg.SOLVER[key] == mine.SOLVER[key], key
    assert cfg.INPUT.NUM_PRE_CLIPS == mine.INPUT.NUM_PRE_CLIPS and cfg.TEST.NMS_THRESH == mine.TEST.NMS_THRESH


def test_mmn_settings_are_checked():
    with pytest.raises(TanError, match="MODEL.TAN.FEAT2D.NAME is set, but MODEL.ARCHITECTURE is 'MMN'.*"
                                       "set MODEL.MMN.FEAT2D.NAME instead"):
        load_config(MMN_SYNTHETIC, ["MODEL.TAN.FEAT2D.NAME", "conv"])
    with pytest.raises(TanError, match="MODEL.MMN.JOINT_SPACE_SIZE is set, but MODEL.ARCHITECTURE is 'TAN'"):
        load_config(os.path.join(REPO, "configs", "2dtan_synthetic.yaml"), ["MODEL.MMN.JOINT_SPACE_SIZE", "8"])
    with pytest.raises(TanError, match="PAIRWISE_SENT_WEIGHT"):
        load_config(MMN_SYNTHETIC, ["MODEL.MMN.LOSS.PAIRWISE_SENT_WEIGHT", "0.5"])
    with pytest.raises(TanError, match="TEXT_ENCODER.NAME"):
        load_config(MMN_SYNTHETIC, ["MODEL.MMN.TEXT_ENCODER.NAME", "GPT"])
    with pytest.raises(TanError, match="MODEL.MMN.FEAT2D.POOLING_COUNTS"):
        load_config(MMN_SYNTHETIC, ["MODEL.MMN.FEAT2D.POOLING_COUNTS", "[15, 8]"])
    with pytest.raises(TanError, match="MODEL.TAN.FEAT2D.NAME"):
        load_config(os.path.join(REPO, "configs", "2dtan_synthetic.yaml"), ["MODEL.TAN.FEAT2D.NAME", "avg"])
    with pytest.raises(TanError, match="TAU_SENT"):
        load_config(MMN_SYNTHETIC, ["MODEL.MMN.LOSS.TAU_SENT", "0"])


def test_state_dict_names_and_shapes_are_those_of_mmn(monkeypatch):
    """The TACoS config's state dict equals MMN's (tests/fixtures/mmn_state_dict_tacos.json,
    written from MMN's code), DistilBERT included, for both 2D maps."""
    transformers = pytest.importorskip("transformers")
    import tan.modeling.mmn.text_encoder as text_encoder
    monkeypatch.setattr(text_encoder, "load_distilbert",
                        lambda name: transformers.DistilBertModel(transformers.DistilBertConfig()))
    expected = json.loads(open(os.path.join(FIXTURES, "mmn_state_dict_tacos.json")).read())
    config = os.path.join(REPO, "configs", "mmn_128x128_pool_k5l8_tacos.yaml")
    pool = {k: list(v.shape) for k, v in build_model(load_config(config)).state_dict().items()}
    assert pool == {name: shape for name, shape in expected["pool"]}
    conv = {k: list(v.shape) for k, v in
            build_model(load_config(config, ["MODEL.MMN.FEAT2D.NAME", "conv"])).state_dict().items()}
    assert conv == dict(pool, **{name: shape for name, shape in expected["conv_extra"]})


def test_a_checkpoint_saved_under_distributed_data_parallel_loads(tmp_path):
    """MMN's released files hold {"model": state dict with "module." names}."""
    cfg = load_config(MMN_SYNTHETIC)
    model = build_model(cfg)
    path = tmp_path / "pool_model_12e.pth"
    torch.save({"model": {f"module.{k}": v for k, v in model.state_dict().items()}, "epoch": 12}, path)
    from tan.utils.checkpoint_file import load_model_weights, model_state_from, read_checkpoint
    other = build_model(cfg)
    load_model_weights(other, model_state_from(read_checkpoint(str(path)), str(path)), str(path))
    for name, value in model.state_dict().items():
        assert torch.equal(other.state_dict()[name], value)


def tiny_loss(**loss):
    cfg = load_config(MMN_SYNTHETIC, [x for k, v in loss.items() for x in (f"MODEL.MMN.LOSS.{k}", str(v))])
    return cfg, MutualMatchingLoss(cfg, build_mask2d(4, [3]))


def test_the_contrastive_loss_against_a_hand_computation():
    """Two videos (two sentences, one sentence), four cells per video, written out term by term."""
    _, loss = tiny_loss(NUM_POSTIVE_VIDEO_PROPOSAL=1, MARGIN=0.2, TAU_VIDEO=0.5, TAU_SENT=0.25,
                        NEGATIVE_VIDEO_IOU=0.5, SENT_REMOVAL_IOU=0.5)
    # cosine of sentence s with cell c of video v: sim[s][v][c]
    sim = torch.tensor([[[0.9, 0.1, -0.2, 0.3], [0.4, -0.5, 0.2, 0.0]],
                        [[0.2, 0.8, 0.1, -0.3], [0.1, 0.3, -0.4, 0.6]],
                        [[-0.1, 0.2, 0.5, 0.3], [0.7, 0.2, 0.1, -0.2]]], dtype=torch.float64)
    ious = torch.tensor([[0.8, 0.2, 0.6, 0.1], [0.1, 0.9, 0.3, 0.0], [0.2, 0.1, 0.3, 0.95]], dtype=torch.float64)
    # sentences 0 and 1 share video 0 and overlap little (kept as each other's negatives); 2 is video 1's
    moments = torch.tensor([[0.0, 4.0], [5.0, 9.0], [1.0, 3.0]], dtype=torch.float64)
    video_index = torch.tensor([0, 0, 1])
    loss_vid, loss_sent = loss.contrastive(sim, ious, moments[:, None], video_index)

    m, tv, ts = 0.2, 0.5, 0.25
    positive = {0: 0, 1: 1, 2: 3}  # the cell of highest IoU
    vid_terms, sent_terms = [], []
    for s in range(3):
        v, p = int(video_index[s]), positive[s]
        pos = sim[s][v][p].item()
        # video to sentence: cell p of video v against every sentence t (all kept here)
        denominator = sum(math.exp((sim[t][v][p].item() - (m if t == s else 0)) / tv) for t in range(3))
        vid_terms.append((pos - m) / tv - math.log(denominator))
        # sentence to video: the positive, own cells (IoU >= 0.5 count as similarity 0), other video's cells
        own = [sim[s][v][c].item() if ious[s][c] < 0.5 else 0.0 for c in range(4)]
        other = [sim[s][1 - v][c].item() for c in range(4)]
        denominator = math.exp((pos - m) / ts) + sum(math.exp(x / ts) for x in own + other) + 1e-6
        sent_terms.append((pos - m) / ts - math.log(denominator))
    assert loss_vid.item() == pytest.approx(-sum(vid_terms) / 3, rel=1e-9)
    assert loss_sent.item() == pytest.approx(-sum(sent_terms) / 3, rel=1e-9)

    # overlapping sentences of one video are not each other's negatives
    overlapping = torch.tensor([[0.0, 4.0], [0.5, 4.0], [1.0, 3.0]], dtype=torch.float64)
    loss_vid_2, _ = loss.contrastive(sim, ious, overlapping[:, None], video_index)
    vid_terms = []
    for s in range(3):
        v, p = int(video_index[s]), positive[s]
        kept = [t for t in range(3) if t == s or int(video_index[t]) != v]
        denominator = sum(math.exp((sim[t][v][p].item() - (m if t == s else 0)) / tv) for t in kept)
        vid_terms.append((sim[s][v][p].item() - m) / tv - math.log(denominator))
    assert loss_vid_2.item() == pytest.approx(-sum(vid_terms) / 3, rel=1e-9)


def shared_models(*opts):
    """Ours and the baseline written MMN's way, with the same weights."""
    cfg = load_config(MMN_SYNTHETIC, ["MODEL.MMN.FEATPOOL.HIDDEN_SIZE", "16", "MODEL.MMN.PREDICTOR.HIDDEN_SIZE", "16",
                                      "MODEL.MMN.JOINT_SPACE_SIZE", "8", "MODEL.MMN.TEXT_ENCODER.LSTM.HIDDEN_SIZE", "16",
                                      *opts])
    torch.manual_seed(0)
    ours = build_model(cfg).double()
    reference = ReferenceMMN(cfg).double()
    reference.load_state_dict(ours.state_dict())
    return cfg, ours, reference


def video_batch(cfg, counts, seed=0):
    gen = torch.Generator().manual_seed(seed)
    items = []
    for count in counts:
        duration = 20 + 40 * torch.rand(1, generator=gen, dtype=torch.float64).item()
        starts = torch.rand(count, generator=gen, dtype=torch.float64) * 0.6 * duration
        ends = starts + (0.1 + 0.3 * torch.rand(count, generator=gen, dtype=torch.float64)) * duration
        items.append({"feats": torch.randn(cfg.INPUT.NUM_PRE_CLIPS, 128, generator=gen, dtype=torch.float64).abs(),
                      "queries": [torch.randn(int(n), 300, generator=gen, dtype=torch.float64)
                                  for n in torch.randint(2, 9, (count,), generator=gen)],
                      # float32 values, as the datasets hold them
                      "moments": torch.stack([starts, ends], dim=1).float().double(),
                      "gt_moments": torch.stack([starts, ends], dim=1).float().double()[:, None, :],
                      "durations": torch.full((count,), duration).float().double(),
                      "indices": torch.arange(count)})
    batch = VideoBatchCollator()(items)
    batch["queries"] = batch["queries"].double()
    return batch


@pytest.mark.parametrize("opts", [(), ("MODEL.MMN.FEAT2D.NAME", "conv"),
                                  ("MODEL.MMN.LOSS.NUM_POSTIVE_VIDEO_PROPOSAL", "3"),
                                  ("MODEL.MMN.PREDICTOR.STRIP_ROWS", "0")])
def test_losses_gradients_and_scores_equal_mmns_arithmetic(opts):
    """Our batched MMN against the per-video loops of MMN's code, in float64:
    the three loss terms, every gradient, the batch-norm statistics, the test scores."""
    cfg, ours, reference = shared_models(*opts)
    batch = video_batch(cfg, [3, 1, 4])
    mmn_batch = to_mmn_batch(batch, cfg.MODEL.MMN.NUM_CLIPS)
    mmn_batch["iou2ds"] = [t.double() for t in mmn_batch["iou2ds"]]  # float32 IoUs, as MMN (and we) compute them
    mmn_batch["moments"] = [t.double() for t in mmn_batch["moments"]]
    for epoch in (1, cfg.SOLVER.ONLY_IOU + 1):
        ours.zero_grad(), reference.zero_grad()
        ours.set_epoch(epoch)
        terms = ours.losses(ours(batch["feats"], batch["queries"], batch["wordlens"], batch["video_index"]), batch)
        loss_vid, loss_sent, loss_iou = reference.losses(
            reference(mmn_batch["feats"], mmn_batch["queries"], mmn_batch["wordlens"]),
            mmn_batch["iou2ds"], mmn_batch["moments"])
        weight = cfg.MODEL.MMN.LOSS.CONTRASTIVE_WEIGHT * (1 if epoch <= cfg.SOLVER.ONLY_IOU else 0.01)
        torch.testing.assert_close(terms["loss_iou"], loss_iou, rtol=1e-9, atol=1e-12)
        # (MMN's margin mask is a float32 identity, here of the loss's dtype: 1e-8 apart in float64)
        torch.testing.assert_close(terms["loss_vid"], weight * loss_vid, rtol=1e-7, atol=1e-12)
        torch.testing.assert_close(terms["loss_sent"], weight * loss_sent, rtol=1e-9, atol=1e-12)
        sum(terms.values()).backward()
        total_loss(loss_vid, loss_sent, loss_iou, epoch, cfg).backward()
        grads = dict(reference.named_parameters())
        for name, p in ours.named_parameters():
            torch.testing.assert_close(p.grad, grads[name].grad, rtol=1e-6, atol=1e-9, msg=name)
    for name, value in reference.state_dict().items():  # running statistics of batch norm
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=1e-9, atol=1e-12, msg=name)
    ours.eval(), reference.eval()
    with torch.no_grad():
        scores = ours.scores(ours(batch["feats"], batch["queries"], batch["wordlens"], batch["video_index"]))
        expected = torch.cat(reference.test_scores(reference(mmn_batch["feats"], mmn_batch["queries"],
                                                             mmn_batch["wordlens"])))
    torch.testing.assert_close(scores, expected.float() if scores.dtype == torch.float32 else expected,
                               rtol=1e-6, atol=1e-9)


def test_the_test_score_on_hand_made_embeddings():
    """((c + 1) / 2) ** POW * sigmoid(10 c_iou) at every valid cell, zero elsewhere."""
    cfg = load_config(MMN_SYNTHETIC, ["TEST.CONTRASTIVE_SCORE_POW", "0.3"])
    model = build_model(cfg)
    cells = model.proposal_conv.cells
    c = len(cells)
    angles = torch.linspace(0, math.pi, c)
    match_cells = torch.stack([torch.cos(angles), torch.sin(angles)])[None]  # [1, 2, C] unit vectors
    iou_cells = torch.stack([torch.cos(angles / 2), torch.sin(angles / 2)])[None]
    sentence = torch.tensor([[1.0, 0.0]])
    output = MMNOutput(CellEmbeddings(match_cells, iou_cells), sentence, sentence, None)
    scores = model.scores(output)[0].flatten()
    expected = ((torch.cos(angles) + 1) / 2) ** 0.3 * torch.sigmoid(10 * torch.cos(angles / 2))
    torch.testing.assert_close(scores[cells], expected)
    assert scores[[i for i in range(scores.numel()) if i not in set(cells.tolist())]].abs().max() == 0
    assert scores[cells][0] == pytest.approx(torch.sigmoid(torch.tensor(10.0)).item())  # c = 1, c_iou = 1


def test_the_conv_map_against_a_direct_computation():
    torch.manual_seed(0)
    n, counts, h = 16, [5, 3], 4
    conv_map = SparseConv2D(n, counts, h)
    x = torch.randn(2, h, n)
    out = conv_map(x)
    mask = build_mask2d(n, counts)
    assert torch.equal(out[:, :, ~mask], torch.zeros_like(out[:, :, ~mask]))
    # the first diagonals written out: (i, i) is clip i; (i, i+1) = W0 [x_i, x_{i+1}] + b0;
    # (i, i+2) = W1 [m_i, m_{i+1}] + b1 where m is the first diagonal
    w0, b0 = conv_map.convs[0].weight, conv_map.convs[0].bias
    first = torch.stack([w0[:, :, 0] @ x[0, :, i] + w0[:, :, 1] @ x[0, :, i + 1] + b0 for i in range(n - 1)], 1)
    torch.testing.assert_close(out[0, :, torch.arange(n), torch.arange(n)], x[0])
    torch.testing.assert_close(out[0, :, torch.arange(n - 1), torch.arange(1, n)], first)
    w1, b1 = conv_map.convs[1].weight, conv_map.convs[1].bias
    second = torch.stack([w1[:, :, 0] @ first[:, i] + w1[:, :, 1] @ first[:, i + 1] + b1 for i in range(n - 2)], 1)
    torch.testing.assert_close(out[0, :, torch.arange(n - 2), torch.arange(2, n)], second)
    # the whole map against the chain filled one diagonal at a time (MMN's way), weights shared
    chain = ChainMap2D("conv", n, counts, h)
    chain.load_state_dict(conv_map.state_dict())
    torch.testing.assert_close(out, chain(x))
    # the stride-2 step: kernel 3, stride 2, at the first cell of the second group
    assert [tuple(c.kernel_size + c.stride) for c in conv_map.convs][5] == (3, 2)


def test_the_conv_map_variant_of_2dtan_has_its_own_weights():
    cfg = load_config(os.path.join(REPO, "configs", "2dtan_synthetic.yaml"), ["MODEL.TAN.FEAT2D.NAME", "conv"])
    names = [k for k in build_model(cfg).state_dict() if k.startswith("feat2d.")]
    assert names[:2] == ["feat2d.convs.0.weight", "feat2d.convs.0.bias"] and len(names) == 2 * (7 + 4)


def test_batches_of_videos_and_sampled_sentences(synthetic_root):
    from tan.data import RunData
    cfg = load_config(MMN_SYNTHETIC, ["DATASETS.ROOT", synthetic_root, "DATALOADER.SENTENCES_PER_VIDEO", "2",
                                      "SOLVER.BATCH_SIZE", "4"])
    data = RunData(cfg)
    loader = data.train_loader(distributed=False, by_video=True)
    groups = loader.dataset
    dataset = groups.by_query
    assert sum(len(g) for _, g in groups.videos) == len(dataset)  # every query in exactly one video
    for _, queries in groups.videos:
        assert len({dataset.video_ids[q] for q in queries}) == 1
    loader.sampler.set_epoch(1)
    batch = next(iter(loader))
    counts = torch.bincount(batch["video_index"]).tolist()
    assert len(counts) == 4 and max(counts) <= 2 and batch["queries"].shape[0] == sum(counts)
    videos_of_rows = {}
    for row, index in enumerate(batch["indices"].tolist()):  # each feature row is one video of the dataset
        videos_of_rows.setdefault(int(batch["video_index"][row]), set()).add(int(dataset.video_ids[index]))
        assert torch.equal(batch["moments"][row], torch.from_numpy(dataset.moments[index]))
    assert all(len(v) == 1 for v in videos_of_rows.values())
    assert len(set.union(*videos_of_rows.values())) == 4  # four different videos
    video = dataset.videos[next(iter(videos_of_rows[0]))]
    torch.testing.assert_close(batch["feats"][0], torch.from_numpy(dataset.video_features(video)))
    many = max(range(len(groups)), key=lambda p: len(groups.videos[p][1]))
    assert len(groups.videos[many][1]) > 2 and groups.groups[many] == (many, -1)
    negative = load_config(MMN_SYNTHETIC, ["DATASETS.ROOT", synthetic_root, "DATALOADER.SENTENCES_PER_VIDEO", "2",
                                           "SEED", "-1"])
    assert len(RunData(negative).train_loader(False, by_video=True).dataset.sentences(many, 1)) == 2
    draws = {tuple(groups.sentences(many, epoch)) for epoch in range(1, 8)}
    assert len(draws) > 1 and all(len(d) == 2 for d in draws)  # drawn anew each epoch ...
    assert groups.sentences(many, 3).tolist() == groups.sentences(many, 3).tolist()  # ... reproducibly
    [test] = data.test_loaders(distributed=False, by_video=True)
    assert sum(len(b["indices"]) for b in test) == len(test.dataset.by_query)  # evaluation takes them all


def write_tiny_distilbert(folder, words):
    """A DistilBERT of a few thousand weights and its tokenizer, saved as a local folder (no download)."""
    transformers = pytest.importorskip("transformers")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words))]
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    tokenizer = transformers.DistilBertTokenizer(os.path.join(folder, "vocab.txt"))
    tokenizer.save_pretrained(folder)
    config = transformers.DistilBertConfig(vocab_size=len(vocab), dim=16, n_layers=1, n_heads=2, hidden_dim=32,
                                           max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.DistilBertModel(config).save_pretrained(folder)
    return folder


def test_word_pieces_and_the_bert_encoder_with_a_tiny_local_distilbert(tmp_path):
    from tan.data.text.word_pieces import WordPieces
    from tan.modeling.mmn.text_encoder import BertTextEncoder, load_distilbert
    folder = write_tiny_distilbert(str(tmp_path / "bert"), ["the", "person", "opens", "door"])
    pieces = WordPieces.from_pretrained(folder)
    ids = pieces.encode_sentence("The person opens the fridge")
    assert ids[0] == pieces.tokenizer.cls_token_id and ids[-1] == pieces.tokenizer.sep_token_id
    assert pieces.unknown_count(ids) == 1 and len(pieces.encode_sentence("  ")) == 0
    encoder = BertTextEncoder(load_distilbert(folder), joint_size=8)
    padded = torch.zeros(2, 7, dtype=torch.long)
    short = torch.from_numpy(pieces.encode_sentence("the door"))
    padded[0, :len(short)] = short
    padded[1, :len(ids)] = torch.from_numpy(ids)
    encoder.eval()
    both = encoder(padded, torch.tensor([len(short), len(ids)]))
    alone = encoder(short[None], torch.tensor([len(short)]))
    torch.testing.assert_close(both[0][:1], alone[0], rtol=1e-5, atol=1e-6)  # padding is not read
    with pytest.raises(TanError, match="cannot load the DistilBERT model"):
        load_distilbert(str(tmp_path / "nothing_here"))


def test_without_transformers_bert_says_how_to_get_it(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails as if not installed
    with pytest.raises(TanError, match=r"pip install 'tan\[bert\]'.*TEXT_ENCODER.NAME LSTM"):
        build_model(load_config(MMN_SYNTHETIC, ["MODEL.MMN.TEXT_ENCODER.NAME", "BERT"]))
    from tan.data.text.word_pieces import WordPieces
    with pytest.raises(TanError, match="transformers package"):
        WordPieces.from_pretrained("distilbert-base-uncased")


def test_training_with_bert_and_no_transformers_is_refused_with_the_way_around_before_any_work(
        synthetic_root, tmp_path, monkeypatch):
    # through the command's set-up: the model's environment is asked before the text input
    # loads a tokenizer (which would fail with a message that does not name LSTM)
    import sys
    from conftest import run_main
    monkeypatch.setitem(sys.modules, "transformers", None)
    out = tmp_path / "never"
    proc = run_main("train_net", "--config-file", MMN_SYNTHETIC, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", out,
                    "MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "MODEL.MMN.TEXT_ENCODER.NAME", "BERT")
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'tan[bert]'" in proc.stderr and "TEXT_ENCODER.NAME LSTM" in proc.stderr
    assert not out.exists()


def test_strips_with_a_dense_first_layer_and_too_many_positives():
    """A layer whose strips would save little runs dense, the first one too (padded once)."""
    cfg = load_config(os.path.join(REPO, "configs", "mmn_16x16_pool_k5l8_charades.yaml"),
                      ["MODEL.MMN.TEXT_ENCODER.NAME", "LSTM", "MODEL.MMN.PREDICTOR.NUM_STACK_LAYERS", "2",
                       "MODEL.MMN.FEATPOOL.HIDDEN_SIZE", "8", "MODEL.MMN.PREDICTOR.HIDDEN_SIZE", "8"])
    torch.manual_seed(0)
    model = build_model(cfg).double()
    assert model.proposal_conv.train_plans[0] is None  # dense
    dense = build_model(load_config(os.path.join(REPO, "configs", "mmn_16x16_pool_k5l8_charades.yaml"),
                                    ["MODEL.MMN.TEXT_ENCODER.NAME", "LSTM", "MODEL.MMN.PREDICTOR.NUM_STACK_LAYERS",
                                     "2", "MODEL.MMN.FEATPOOL.HIDDEN_SIZE", "8", "MODEL.MMN.PREDICTOR.HIDDEN_SIZE",
                                     "8", "MODEL.MMN.PREDICTOR.STRIP_ROWS", "0"])).double()
    dense.load_state_dict(model.state_dict())
    x = torch.randn(2, 8, 16, 16, dtype=torch.float64) * model.mask2d
    for training in (True, False):
        model.train(training), dense.train(training)
        for a, b in zip(model.proposal_conv(x), dense.proposal_conv(x)):
            torch.testing.assert_close(a, b)
    with pytest.raises(TanError, match="NUM_POSTIVE_VIDEO_PROPOSAL"):
        load_config(MMN_SYNTHETIC, ["MODEL.MMN.LOSS.NUM_POSTIVE_VIDEO_PROPOSAL", "1000"])


def test_several_windows_take_the_best_window_in_every_term():
    """IoU targets and positives use each sentence's best window; two sentences of a video overlap
    (and are not each other's negatives) when any window of one overlaps any window of the other."""
    cfg, loss = tiny_loss(NUM_POSTIVE_VIDEO_PROPOSAL=1, SENT_REMOVAL_IOU=0.5)
    durations = torch.tensor([8.0, 8.0])
    a, b, far = [0.0, 2.0], [4.0, 8.0], [6.0, 8.0]
    both = torch.tensor([[a, b], [far, far]])  # sentence 0 has two windows; sentence 1 one (padded)
    per_window = [loss.cell_ious(torch.tensor([[w], [far]]), durations, 4) for w in (a, b)]
    torch.testing.assert_close(loss.cell_ious(both, durations, 4), torch.maximum(*per_window))
    sim = torch.randn(2, 1, per_window[0].shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ious = loss.cell_ious(both, durations, 4).double()
    video_index = torch.tensor([0, 0])
    # sentence 0's second window overlaps sentence 1's: as if sentence 0 had only that window
    overlapping = loss.contrastive(sim, ious, both.double(), video_index)
    as_if_b = loss.contrastive(sim, ious, torch.tensor([[b], [far]], dtype=torch.float64), video_index)
    as_if_a = loss.contrastive(sim, ious, torch.tensor([[a], [far]], dtype=torch.float64), video_index)
    torch.testing.assert_close(overlapping, as_if_b)
    assert not torch.allclose(overlapping[0], as_if_a[0])
