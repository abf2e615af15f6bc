import os

import pytest
import torch
from torch.nn import functional as F

from tan.config import load_config
from tan.modeling import build_model
from tan.modeling.map2d.feat2d import SparseMaxPool2D, build_mask2d
from tan.modeling.map2d.iou_loss import ScaledIoULoss
from tan.structures.moments import iou2d
from tan.modeling.map2d.strips import build_weight_maps

from conftest import REPO, SYNTHETIC_CONFIG


def expected_cells(n, counts):
    """docs/model.md §3.1 written out: offsets and strides as lists of (i, j)."""
    cells = {(i, i) for i in range(n)}
    offset, stride = 0, 1
    for group, count in enumerate(counts):
        if group:
            stride *= 2
        for _ in range(count):
            offset += stride
            cells |= {(i, i + offset) for i in range(0, n, stride) if i + offset < n}
    return cells


def test_mask2d_tacos_setting_has_2548_cells_at_the_documented_offsets():
    mask = build_mask2d(128, [15, 8, 8, 8])
    assert int(mask.sum()) == 2548
    assert {tuple(c) for c in mask.nonzero().tolist()} == expected_cells(128, [15, 8, 8, 8])
    offsets = sorted({j - i for i, j in mask.nonzero().tolist()})
    assert offsets == list(range(0, 16)) + list(range(17, 32, 2)) + list(range(35, 64, 4)) + list(range(71, 128, 8))
    # stride-8 offsets start only at multiples of 8
    assert mask[8, 8 + 71] and not mask[4, 4 + 71]


def test_mask2d_activitynet_setting_has_1104_cells():
    mask = build_mask2d(64, [15, 8, 8])
    assert int(mask.sum()) == 1104
    assert {tuple(c) for c in mask.nonzero().tolist()} == expected_cells(64, [15, 8, 8])
    assert not mask.tril(-1).any()


def brute_force_map(x, mask):
    out = torch.zeros(x.shape[0], x.shape[1], mask.shape[0], mask.shape[0])
    for i, j in mask.nonzero().tolist():
        out[:, :, i, j] = x[:, :, i:j + 1].max(dim=-1).values
    return out


def test_2d_map_equals_brute_force_max_over_clips_bit_for_bit():
    torch.manual_seed(0)
    for n, counts in [(128, [15, 8, 8, 8]), (64, [15, 8, 8]), (16, [15]), (16, [7, 4])]:
        pool = SparseMaxPool2D(n, counts)
        x = torch.randn(2, 5, n)
        assert torch.equal(pool(x), brute_force_map(x, pool.mask2d))


def small_cfg(*opts):
    return load_config(SYNTHETIC_CONFIG, list(opts))


def test_model_output_keeps_the_batch_dimension_for_b_1():
    cfg = small_cfg()
    model = build_model(cfg).eval()
    logits = model(torch.randn(1, 64, 128), torch.randn(1, 7, 300), torch.tensor([7]))
    assert logits.shape == (1, 16, 16)
    logits = model(torch.randn(3, 64, 128), torch.randn(3, 7, 300), torch.tensor([7, 2, 5]))
    assert logits.shape == (3, 16, 16)


def test_padding_after_the_last_word_does_not_change_the_scores():
    for bidirectional in ("False", "True"):
        model = build_model(small_cfg("MODEL.TAN.INTEGRATOR.LSTM.BIDIRECTIONAL", bidirectional)).eval()
        feats, words = torch.randn(1, 64, 128), torch.randn(1, 4, 300)
        padded = torch.cat([words, torch.randn(1, 3, 300)], dim=1)
        with torch.no_grad():
            a = model(feats, words, torch.tensor([4]))
            b = model(feats, padded, torch.tensor([4]))
        torch.testing.assert_close(a, b)


def test_scores_are_zero_outside_the_mask():
    model = build_model(small_cfg()).eval()
    scores = model.scores(model(torch.randn(2, 64, 128), torch.randn(2, 3, 300), torch.tensor([3, 1])))
    assert (scores[:, ~model.mask2d] == 0).all() and (scores[:, model.mask2d] > 0).all()


TACOS_STATE_DICT = {
    "featpool.conv.weight": [512, 4096, 1], "featpool.conv.bias": [512],
    **{f"integrator.lstm.weight_ih_l{k}": [2048, 300 if k == 0 else 512] for k in range(3)},
    **{f"integrator.lstm.weight_hh_l{k}": [2048, 512] for k in range(3)},
    **{f"integrator.lstm.bias_ih_l{k}": [2048] for k in range(3)},
    **{f"integrator.lstm.bias_hh_l{k}": [2048] for k in range(3)},
    "integrator.fc.weight": [512, 512], "integrator.fc.bias": [512],
    "integrator.conv.weight": [512, 512, 1, 1], "integrator.conv.bias": [512],
    **{f"predictor.convs.{k}.weight": [512, 512, 5, 5] for k in range(8)},
    **{f"predictor.convs.{k}.bias": [512] for k in range(8)},
    "predictor.pred.weight": [1, 512, 1, 1], "predictor.pred.bias": [1],
}


def test_tacos_state_dict_names_and_shapes_match_the_checkpoint_contract():
    from conftest import REPO
    import os

    cfg = load_config(os.path.join(REPO, "configs", "2dtan_128x128_pool_k5l8_tacos.yaml"))
    model = build_model(cfg)
    assert {k: list(v.shape) for k, v in model.state_dict().items()} == TACOS_STATE_DICT


def test_weight_maps_are_reciprocal_counts_of_valid_cells():
    mask = build_mask2d(8, [3, 2])
    maps = build_weight_maps(mask, 3, 2)
    counts = F.conv2d(mask[None, None].float(), torch.ones(1, 1, 3, 3), padding=2)[0, 0]
    assert maps[0].shape == (10, 10)
    torch.testing.assert_close(maps[0][counts > 0], 1 / counts[counts > 0])
    assert (maps[0][counts == 0] == 0).all()
    assert maps[1].shape == (8, 8)
    valid = F.conv2d((maps[0] > 0).float()[None, None], torch.ones(1, 1, 3, 3))[0, 0]
    torch.testing.assert_close(maps[1][valid > 0], 1 / valid[valid > 0])


def test_iou2d_by_hand():
    # duration 8 s, N = 4: cell (i, j) is [2 i, 2 (j + 1)]
    ious = iou2d(torch.tensor([[2.0, 5.0]]), torch.tensor([8.0]), 4)[0]
    assert ious[1, 1] == 2 / 3  # [2, 4] vs [2, 5]
    assert ious[1, 2] == 3 / 4  # [2, 6]
    assert ious[0, 0] == 0  # [0, 2] touches but does not overlap
    assert ious[0, 3] == 3 / 8  # [0, 8]
    assert abs(ious[2, 3] - 1 / 6) < 1e-7  # [4, 8]: overlap 1, union 6


def test_loss_is_bce_over_valid_cells_against_rescaled_iou():
    mask = torch.tensor([[True, True], [False, True]])
    loss_fn = ScaledIoULoss(0.25, 0.75, mask)
    logits = torch.tensor([[[0.5, -1.0], [9.0, 2.0]], [[0.0, 1.0], [9.0, -2.0]]])
    moments = torch.tensor([[0.0, 2.0], [0.0, 4.0]])  # duration 4: cells [0,2], [0,4], [2,4]
    durations = torch.tensor([4.0, 4.0])
    # IoUs: query 1 -> 1, 0.5, 0 ; query 2 -> 0.5, 1, 0.5 ; targets (iou - .25) / .5 clamped
    targets = [1.0, 0.5, 0.0, 0.5, 1.0, 0.5]
    xs = [0.5, -1.0, 2.0, 0.0, 1.0, -2.0]
    expected = sum(-(t * torch.log(torch.sigmoid(torch.tensor(x))) + (1 - t) * torch.log(1 - torch.sigmoid(torch.tensor(x))))
                   for t, x in zip(targets, xs)) / 6
    torch.testing.assert_close(loss_fn(logits, moments[:, None], durations), expected)


def test_a_model_missing_a_required_member_is_refused_when_it_is_registered_naming_it():
    from tan.config.models import MODELS
    from tan.errors import TanError
    from tan.modeling import GroundingModel, register_model

    with pytest.raises(TanError, match=r"^model 'HALF_MADE' \(test_modeling\..*Half\) does not define add_config, "
                                       r"losses, which the contract requires \(docs/models.md\)$"):
        @register_model("HALF_MADE")
        class Half(GroundingModel):
            def encode_video(self, feats):
                return feats

            def ground(self, video, queries, wordlens, video_index=None):
                return video

            def scores(self, output):
                return output
    with pytest.raises(TanError, match=r"model 'PLAIN' \(.*Plain\) is not a subclass of tan.modeling.GroundingModel"):
        @register_model("PLAIN")
        class Plain(torch.nn.Module):
            pass
    assert "HALF_MADE" not in MODELS and "PLAIN" not in MODELS


def test_a_plug_in_whose_model_misses_a_required_member_fails_in_one_line(tmp_path):
    from tan.errors import TanError

    plugin = tmp_path / "half_model.py"
    plugin.write_text("from tan.modeling import GroundingModel, register_model\n\n\n"
                      "@register_model('HALF_PLUGIN')\n"
                      "class HalfPlugin(GroundingModel):\n"
                      "    add_config = staticmethod(lambda cfg: None)\n")
    with pytest.raises(TanError) as error:
        load_config(os.path.join(REPO, "configs", "2dtan_synthetic.yaml"), ["PLUGINS", repr([str(plugin)])])
    assert str(error.value) == (f"command line: PLUGINS: plug-in {str(plugin)!r}: model 'HALF_PLUGIN' "
                                "(half_model.HalfPlugin) does not define encode_video, ground, losses, scores, which "
                                "the contract requires (docs/models.md)")
