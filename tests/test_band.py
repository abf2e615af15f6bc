"""Training keeps one band per predictor layer (tan/modeling/map2d/band.py),
2D-TAN's as its non-zero values and their bits, which give it back exactly:
the gradients are those of the dense stack (float64) and, for 2D-TAN, bit for
bit those of the strip path it replaces (float32); recomputation changes
nothing; and what a step keeps for its backward is a fraction of the dense
stack's, measured from the allocator's records."""
import json

import pytest
import torch

from benchmarking.memory import step_memory
from benchmarking.mmn_workloads import random_video_batch
from tan.config import load_config
from tan.config.setup import merge_overrides
from tan.engine.step import forward_batch
from tan.errors import TanError
from tan.modeling.map2d.nonzero import keep_nonzero, nonzero_places, restore_nonzero
from tan.modeling import build_model
from tan.modeling.tan2d.predictor import ProposalConv

from conftest import SYNTHETIC_CONFIG

MMN_CONFIG = SYNTHETIC_CONFIG.replace("2dtan_synthetic", "mmn_synthetic")
# (N, pooling counts, K, layers, strip rows): one strip, many, ActivityNet's K 9 x 4, strips of one row
SETTINGS = [(16, [7, 4], 3, 4, 16), (32, [15, 8], 5, 4, 8), (64, [15, 8, 8], 9, 4, 16), (16, [15], 3, 4, 1)]


def map_opts(arch, n, counts, k, layers, strip_rows, hidden=8):
    keys = {"NUM_CLIPS": n, "FEAT2D.POOLING_COUNTS": counts, "PREDICTOR.KERNEL_SIZE": k,
            "PREDICTOR.NUM_STACK_LAYERS": layers, "PREDICTOR.STRIP_ROWS": strip_rows, "FEATPOOL.KERNEL_SIZE": 2,
            "FEATPOOL.INPUT_SIZE": 24, "FEATPOOL.HIDDEN_SIZE": hidden, "PREDICTOR.HIDDEN_SIZE": hidden}
    opts = ["INPUT.NUM_PRE_CLIPS", str(2 * n), "INPUT.PRE_QUERY_SIZE", "12"]
    for key, value in keys.items():
        opts += [f"MODEL.{arch}.{key}", str(value)]
    return opts


def tan_model(setting, dtype, *opts):
    cfg = load_config(SYNTHETIC_CONFIG, merge_overrides(map_opts("TAN", *setting),
                                                        ["MODEL.TAN.INTEGRATOR.QUERY_HIDDEN_SIZE", "8"], opts))
    torch.manual_seed(0)
    return cfg, build_model(cfg).to(dtype)


def tan_batch(cfg, batch, dtype, sentences_per_video=1):
    gen = torch.Generator().manual_seed(1)
    videos = batch // sentences_per_video
    durations = (torch.rand(videos, generator=gen) * 40 + 5).repeat_interleave(sentences_per_video)
    starts = torch.rand(batch, generator=gen) * 0.6 * durations
    moments = torch.stack([starts, starts + (0.1 + 0.3 * torch.rand(batch, generator=gen)) * durations], dim=1)
    out = dict(feats=torch.randn(videos, cfg.INPUT.NUM_PRE_CLIPS, 24, generator=gen).abs(),
               queries=torch.randn(batch, 7, 12, generator=gen), wordlens=torch.randint(2, 8, (batch,), generator=gen),
               durations=durations, moments=moments, gt_moments=moments[:, None])
    if sentences_per_video > 1:
        out["video_index"] = torch.arange(videos).repeat_interleave(sentences_per_video)
    return {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in out.items()}


def gradients(model, batch):
    """(loss, gradient of every parameter, running statistics) of one forward and backward."""
    model.zero_grad(set_to_none=True)
    output = forward_batch(model, batch)
    loss = sum(model.losses(output, batch).values())
    loss.backward()
    stats = {n: b.clone() for n, b in model.named_buffers() if "running" in n or "batches" in n}
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, stats


def without_bands(monkeypatch, module_class):
    """The strip path of before: autograd keeps what it keeps."""
    monkeypatch.setattr(module_class, "stores_bands", property(lambda self: False))


@pytest.mark.parametrize("setting", SETTINGS)
def test_tan_bands_give_the_strip_paths_float32_gradients_bit_for_bit(setting, monkeypatch):
    cfg, model = tan_model(setting, torch.float32)
    batch = tan_batch(cfg, 4, torch.float32)
    loss, grads, _ = gradients(model, batch)
    assert model.predictor.stores_bands
    with monkeypatch.context() as m:
        without_bands(m, ProposalConv)
        strip_loss, strip_grads, _ = gradients(model, batch)
    assert torch.equal(loss, strip_loss)
    assert sorted(grads) == sorted(strip_grads)
    differ = [name for name in grads if not torch.equal(grads[name], strip_grads[name])]
    assert not differ, differ


@pytest.mark.parametrize("setting", SETTINGS[:3])
def test_tan_bands_give_the_dense_stacks_gradients_in_float64(setting):
    dense_setting = setting[:4] + (0,)
    results = []
    for s in (setting, dense_setting):
        cfg, model = tan_model(s, torch.float64)
        results.append(gradients(model, tan_batch(cfg, 6, torch.float64, sentences_per_video=2)))
    (loss, grads, _), (dense_loss, dense_grads, _) = results
    torch.testing.assert_close(loss, dense_loss, rtol=1e-12, atol=0)
    for name, grad in dense_grads.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-9, atol=1e-12, msg=name)


def test_one_video_for_several_sentences_gives_the_dense_gradients():
    """ground() with one video's map for all sentences (no video index), as prediction asks."""
    results = []
    for setting in (SETTINGS[1], SETTINGS[1][:4] + (0,)):
        cfg, model = tan_model(setting, torch.float64)
        batch = tan_batch(cfg, 3, torch.float64, sentences_per_video=3)
        del batch["video_index"]
        results.append(gradients(model, batch))
    for name, grad in results[1][1].items():
        torch.testing.assert_close(results[0][1][name], grad, rtol=1e-9, atol=1e-12, msg=name)


def test_recompute_is_checked():
    with pytest.raises(TanError, match="needs MODEL.MMN.PREDICTOR.STRIP_ROWS > 0"):
        load_config(MMN_CONFIG, ["MODEL.MMN.PREDICTOR.RECOMPUTE", "True", "MODEL.MMN.PREDICTOR.STRIP_ROWS", "0"])


def mmn_model(setting, dtype, *opts):
    cfg = load_config(MMN_CONFIG, merge_overrides(map_opts("MMN", *setting), [
        "MODEL.MMN.TEXT_ENCODER.NAME", "LSTM", "MODEL.MMN.JOINT_SPACE_SIZE", "8",
        "MODEL.MMN.TEXT_ENCODER.LSTM.HIDDEN_SIZE", "8", "INPUT.PRE_QUERY_SIZE", "300"], opts))
    torch.manual_seed(0)
    model = build_model(cfg).to(dtype).train()
    batch = random_video_batch(cfg, 3, 2, torch.device("cpu"))
    batch["feats"] = batch["feats"][:, :, :24].contiguous()
    return model, {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in batch.items()}


def assert_mmn_gradients_close(got, want, rtol):
    loss, grads, stats = got
    torch.testing.assert_close(loss, want[0], rtol=rtol, atol=0)
    for name, grad in want[1].items():
        # a conv followed by batch norm has a bias whose true gradient is zero: compare it absolutely
        before_norm = name.startswith("proposal_conv.convs.") and name.endswith("bias")
        scale = max(float(g.abs().max()) for g in want[1].values()) if before_norm else 0.0
        torch.testing.assert_close(grads[name], grad, rtol=rtol, atol=rtol * scale + 1e-15, msg=name)
    for name, value in want[2].items():
        torch.testing.assert_close(stats[name], value, rtol=rtol, atol=1e-15, msg=name)


@pytest.mark.parametrize("setting", SETTINGS[:3])
def test_mmn_bands_give_the_dense_stacks_gradients_and_statistics_in_float64(setting):
    model, batch = mmn_model(setting, torch.float64)
    banded = gradients(model, batch)
    assert model.proposal_conv.stores_bands
    dense_model, _ = mmn_model(setting[:4] + (0,), torch.float64)
    assert_mmn_gradients_close(banded, gradients(dense_model, batch), 1e-9)


def test_recomputation_gives_the_same_gradients_exactly_and_counts_batch_norm_once():
    setting = SETTINGS[1]
    cfg, model = tan_model(setting, torch.float32)
    cfg_r, recomputing = tan_model(setting, torch.float32, "MODEL.TAN.PREDICTOR.RECOMPUTE", "True")
    assert recomputing.predictor.recompute
    batch = tan_batch(cfg, 4, torch.float32)
    (loss, grads, _), (loss_r, grads_r, _) = gradients(model, batch), gradients(recomputing, batch)
    assert torch.equal(loss, loss_r) and all(torch.equal(grads[n], grads_r[n]) for n in grads)

    mmn, batch = mmn_model(setting, torch.float32)
    mmn_r, _ = mmn_model(setting, torch.float32, "MODEL.MMN.PREDICTOR.RECOMPUTE", "True")
    (loss, grads, stats), (loss_r, grads_r, stats_r) = gradients(mmn, batch), gradients(mmn_r, batch)
    assert torch.equal(loss, loss_r) and all(torch.equal(grads[n], grads_r[n]) for n in grads)
    assert all(torch.equal(stats[n], stats_r[n]) for n in stats)
    assert int(stats_r["proposal_conv.bn.0.num_batches_tracked"]) == 1  # not again in the recomputation


def test_bf16_autocast_trains_in_bands_close_to_float32():
    setting = SETTINGS[1]
    cfg, model = tan_model(setting, torch.float32)
    batch = tan_batch(cfg, 4, torch.float32)
    _, grads, _ = gradients(model, batch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = forward_batch(model, batch)
    model.zero_grad(set_to_none=True)
    model.losses(output, batch)["loss"].backward()
    for name, grad in grads.items():
        assert model.get_parameter(name).grad.dtype == torch.float32
        torch.testing.assert_close(model.get_parameter(name).grad, grad, rtol=0.1, atol=0.1 * float(grad.abs().max()))


@pytest.mark.parametrize("autocast,backward_inside", [(None, False), (torch.bfloat16, False),
                                                     (torch.bfloat16, True)])
def test_the_first_band_computed_again_gives_the_kept_bands_gradients_bit_for_bit(autocast, backward_inside,
                                                                                  monkeypatch):
    # The fused band is not kept: the first layer's backward computes it again under the
    # forward's autocast, whether the backward runs outside autocast (as a training step
    # runs it) or inside.
    import tan.modeling.tan2d.model as tan_module
    setting = SETTINGS[1]
    cfg, model = tan_model(setting, torch.float32)
    batch = tan_batch(cfg, 4, torch.float32)

    def step():
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            loss = sum(model.losses(forward_batch(model, batch), batch).values())
            if backward_inside:
                loss.backward()
        if not backward_inside:
            loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    loss, grads = step()
    with monkeypatch.context() as m:
        m.setattr(tan_module, "fused_band_recipe", lambda *inputs: None)  # keep the fused band
        kept_loss, kept_grads = step()
    assert torch.equal(loss, kept_loss)
    assert [n for n in grads if not torch.equal(grads[n], kept_grads[n])] == []


def test_a_kept_graph_goes_backward_twice_with_the_first_band_computed_again():
    setting = SETTINGS[1]
    cfg, model = tan_model(setting, torch.float32)
    batch = tan_batch(cfg, 4, torch.float32)
    loss = sum(model.losses(forward_batch(model, batch), batch).values())
    loss.backward(retain_graph=True)
    first = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    loss.backward()
    assert [n for n, p in model.named_parameters() if p.grad is not None and not torch.equal(p.grad, first[n])] == []


def test_training_keeps_each_band_once_as_its_nonzero_values_and_not_the_fused_input_band():
    setting = SETTINGS[1]
    cfg, model = tan_model(setting, torch.float32)
    batch = tan_batch(cfg, 4, torch.float32)
    predictor = model.predictor
    saved = {}

    def pack(tensor):
        saved[tensor.untyped_storage().data_ptr()] = tensor
        return tensor
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = forward_batch(model, batch)
    sum(model.losses(output, batch).values()).backward()
    bands = [(4, 8, len(getattr(predictor, f"band_{i}")) + 1) for i in range(len(predictor.convs))]
    input_band = len(predictor.input_cells) + 1
    assert input_band not in [shape[-1] for shape in bands]
    # no band is kept whole: neither a layer's nor the fused input
    assert [t.shape for t in saved.values() if t.dim() == 3 and t.shape[-1] in [s[-1] for s in bands] + [input_band]
            and t.shape[:2] == (4, 8)] == []
    sizes = [-(-torch.Size(shape).numel() // 8) for shape in bands]
    bits = [t for t in saved.values() if t.dtype == torch.uint8 and t.numel() in sizes]
    values = [t.numel() for t in saved.values() if t.dim() == 1 and t.is_floating_point()]
    assert sorted(b.numel() for b in bits) == sorted(sizes)  # each band's bits, once
    for t in bits + [t for t in saved.values() if t.dim() == 1 and t.numel() in values]:  # no view of a larger storage
        assert t.untyped_storage().nbytes() == t.numel() * t.element_size()
    by_size = dict(zip(sizes, bands))
    kept = [int(nonzero_places(b, by_size[b.numel()]).sum()) for b in bits]
    assert all(count in values for count in kept), (kept, values)  # and as many values as they mark
    assert sum(kept) < 0.75 * sum(torch.Size(shape).numel() for shape in bands)  # a ReLU's output: half zeros


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_a_kept_band_comes_back_exactly(dtype):
    gen = torch.Generator().manual_seed(0)
    for numel in [0, 1, 7, 8, 9, 1001]:
        x = torch.randn(numel, 1, generator=gen).relu().to(dtype)
        if numel > 8:
            x[:5, 0] = torch.tensor([float("nan"), float("inf"), 0.0, 1e-30, -0.0]).to(dtype)
        values, bits = keep_nonzero(x)
        assert bits.dtype == torch.uint8 and bits.numel() == -(-numel // 8)
        assert values.numel() == int((x != 0).sum())
        back = restore_nonzero(values, bits, x.shape)
        assert back.dtype == dtype and torch.equal(back.isnan(), x.isnan())
        assert torch.equal(back.nan_to_num(), x.nan_to_num())
        assert torch.equal(nonzero_places(bits, x.shape), x != 0)
        assert torch.equal(nonzero_places(bits, x.shape, zero=True), x == 0)
        if numel > 8:
            assert back[4, 0].item() == 0 and not back[4, 0].signbit()  # a negative zero comes back as zero


def kept_for_backward(model, batch):
    def step():
        model.zero_grad(set_to_none=True)
        output = forward_batch(model, batch)
        sum(model.losses(output, batch).values()).backward()
    step()
    return step_memory(step, torch.device("cpu"))


def test_a_training_step_keeps_a_fraction_of_the_dense_stacks_activations():
    # the TACoS map (N 128, K 5, 8 layers) with few channels, and its dense stack
    setting = (128, [15, 8, 8, 8], 5, 8, 16)
    cfg, model = tan_model(setting, torch.float32, "MODEL.TAN.FEATPOOL.HIDDEN_SIZE", "16",
                           "MODEL.TAN.PREDICTOR.HIDDEN_SIZE", "16")
    _, dense = tan_model(setting[:4] + (0,), torch.float32, "MODEL.TAN.FEATPOOL.HIDDEN_SIZE", "16",
                         "MODEL.TAN.PREDICTOR.HIDDEN_SIZE", "16")
    batch = tan_batch(cfg, 2, torch.float32)
    (kept, peak), (dense_kept, dense_peak) = kept_for_backward(model, batch), kept_for_backward(dense, batch)
    assert kept < 0.3 * dense_kept, (kept, dense_kept)
    assert peak < 0.5 * dense_peak, (peak, dense_peak)


TINY_TAN = ["MODEL.TAN.FEATPOOL.INPUT_SIZE", "24", "MODEL.TAN.FEATPOOL.HIDDEN_SIZE", "8",
            "MODEL.TAN.PREDICTOR.HIDDEN_SIZE", "8", "MODEL.TAN.INTEGRATOR.QUERY_HIDDEN_SIZE", "8",
            "MODEL.TAN.PREDICTOR.KERNEL_SIZE", "5", "MODEL.TAN.PREDICTOR.NUM_STACK_LAYERS", "4"]


def test_benchmark_sweeps_n_with_memory_beside_the_baseline_and_draws_it(tmp_path, capsys):
    import benchmark
    out, picture = tmp_path / "sweep.json", tmp_path / "sweep.png"
    benchmark.main(["--config-file", SYNTHETIC_CONFIG, "--device", "cpu", "--batch", "2", "--steps", "1",
                    "--warmup", "0", "--sweep-n", "32,64", "--json", str(out), "--plot", str(picture), *TINY_TAN])
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert [p["n"] for p in report["points"]] == [32, 64]
    assert [p["pooling_counts"] for p in report["points"]] == [[15, 8], [15, 8, 8]]
    for point in report["points"]:
        ours, reference = point["results"]["ours"], point["results"]["reference"]
        for key in ("train_samples_per_s", "train_activation_gb_per_sample", "train_peak_growth_gb_per_sample"):
            assert ours[key] > 0 and reference[key] > 0, (point["n"], key)
        assert ours["train_activation_gb_per_sample"] < 0.5 * reference["train_activation_gb_per_sample"]
    assert [line.split()[0] for line in printed.splitlines()[-2:]] == ["32", "64"]
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_benchmark_sweep_names_what_it_cannot_measure():
    import benchmark
    with pytest.raises(TanError, match="power of two of at least 32, got 48"):
        benchmark.main(["--config-file", SYNTHETIC_CONFIG, "--sweep-n", "32,48"])
    ms = SYNTHETIC_CONFIG.replace("2dtan_synthetic", "ms2dtan_synthetic")
    with pytest.raises(TanError, match="not MODEL.ARCHITECTURE 'MS_TAN'"):
        benchmark.main(["--config-file", ms, "--device", "cpu", "--sweep-n", "32"])


@pytest.mark.parametrize("name", ["2dtan_256x256_pool_k5l8_tacos.yaml", "2dtan_512x512_pool_k5l8_tacos.yaml",
                                  "mmn_256x256_pool_k5l8_tacos.yaml", "mmn_512x512_pool_k5l8_tacos.yaml"])
def test_long_video_configs_extend_the_tacos_pooling_counts(name):
    from benchmarking.sweep import long_video_counts
    cfg = load_config(SYNTHETIC_CONFIG.replace("2dtan_synthetic.yaml", name))
    arch = cfg.MODEL[cfg.MODEL.ARCHITECTURE]
    assert list(arch.FEAT2D.POOLING_COUNTS) == long_video_counts(arch.NUM_CLIPS)
    assert cfg.INPUT.NUM_PRE_CLIPS == 2 * arch.NUM_CLIPS and arch.PREDICTOR.STRIP_ROWS > 0


def test_saved_storages_count_a_saved_views_whole_storage_once_and_leave_the_model_out():
    from benchmarking.saved_memory import SavedStorages
    weight = torch.nn.Parameter(torch.randn(10))
    x = torch.randn(1000, requires_grad=True)
    with SavedStorages([weight.untyped_storage().data_ptr()]) as saved:
        y = x * 2  # saves nothing of its inputs' that needs a grad: 2 is a number
        view = y[:10]
        loss = (view * weight).sum() + (view * view).sum()  # the view saved three times: one storage
    loss.backward()
    assert saved.nbytes == 1000 * 4


def test_the_saved_memory_benchmark_reports_a_fresh_process_and_names_what_it_lacks(tmp_path, capsys):
    import benchmark
    from benchmarking.saved_memory import format_report
    out = tmp_path / "saved.json"
    benchmark.main(["--saved-memory", "--config-file", SYNTHETIC_CONFIG, "--json", str(out)])
    report = json.loads(out.read_text())
    row = report["results"]["tan"]
    assert 0 < row["saved_per_sample_gb"] < 0.01 and row["peak_growth_gb"] > 0, row
    assert "chenjoya/2dtan's own code was not measured" in capsys.readouterr().out
    assert row["saved_with_model_per_sample_gb"] > row["saved_per_sample_gb"] and row["first_step_peak_growth_gb"] > 0
    report["results"] = {"chenjoya/2dtan": {"saved_per_sample_gb": 0.8, "peak_growth_gb": 2.0},
                         "tan": {"saved_per_sample_gb": 0.2, "peak_growth_gb": 0.5}}
    assert format_report(report).splitlines()[-1].split() == ["tan", "0.200", "(0.25x)", "n/a", "0.500", "(0.25x)",
                                                              "n/a"]
    with pytest.raises(TanError, match="expected a checkout of chenjoya/2dtan"):
        benchmark.main(["--saved-memory", "--reference-code", str(tmp_path)])
