"""The fast paths equal the direct ones: strip convolutions vs dense, the
gather-built map and index-based loss vs the reference's way, batched NMS vs
the per-query greedy loop; and mixed-precision training runs on CPU."""
import random

import pytest
import torch

from oracles.reference_2dtan import PoolChainMap2D, ReferenceTAN, reference_evaluate, stored_iou2d
from tan.config import load_config
from tan.evaluation import evaluate_moments, top_moments
from tan.engine.precision import autocast, make_grad_scaler
from tan.modeling import build_model
from tan.modeling.map2d.feat2d import SparseMaxPool2D, build_mask2d
from tan.modeling.tan2d.predictor import ProposalConv

from conftest import SYNTHETIC_CONFIG, run_main


def small_cfg(*opts):
    return load_config(SYNTHETIC_CONFIG, ["MODEL.TAN.FEATPOOL.INPUT_SIZE", "24", "MODEL.TAN.FEATPOOL.HIDDEN_SIZE", "8",
                                          "MODEL.TAN.INTEGRATOR.QUERY_HIDDEN_SIZE", "8",
                                          "MODEL.TAN.PREDICTOR.HIDDEN_SIZE", "8", "INPUT.PRE_QUERY_SIZE", "12",
                                          *opts])


def random_inputs(cfg, batch, seed=0):
    gen = torch.Generator().manual_seed(seed)
    feats = torch.randn(batch, cfg.INPUT.NUM_PRE_CLIPS, cfg.MODEL.TAN.FEATPOOL.INPUT_SIZE, generator=gen).abs()
    queries = torch.randn(batch, 7, cfg.INPUT.PRE_QUERY_SIZE, generator=gen)
    wordlens = torch.randint(2, 8, (batch,), generator=gen)
    durations = torch.rand(batch, generator=gen) * 40 + 5
    starts = torch.rand(batch, generator=gen) * 0.6 * durations
    moments = torch.stack([starts, starts + torch.rand(batch, generator=gen) * 0.4 * durations], dim=1)
    return feats, queries, wordlens, moments, durations


@pytest.mark.parametrize("n,counts,k,s,strip", [(16, [15], 3, 4, 1), (16, [7, 4], 5, 8, 4), (32, [15, 8], 5, 4, 16),
                                                 (32, [15, 8], 9, 4, 5), (24, [11, 6], 3, 2, 100)])
def test_strip_convolutions_equal_the_dense_stack_on_valid_cells_and_in_gradients(n, counts, k, s, strip):
    mask = build_mask2d(n, counts)
    torch.manual_seed(0)
    dense = ProposalConv(6, 5, k, s, mask).double()
    strips = ProposalConv(6, 5, k, s, mask, strip_rows=strip).double()
    strips.load_state_dict(dense.state_dict())
    # inputs are zero outside the valid cells, as the 2D map is
    x = torch.randn(3, 6, n, n, dtype=torch.float64) * mask
    out_dense, out_strips = dense(x), strips(x)
    torch.testing.assert_close(out_strips[:, mask], out_dense[:, mask], rtol=1e-10, atol=1e-12)
    target = torch.rand(3, int(mask.sum()), dtype=torch.float64)
    for model, out in ((dense, out_dense), (strips, out_strips)):
        torch.nn.functional.binary_cross_entropy_with_logits(out[:, mask], target).backward()
    for (name, p), q in zip(dense.named_parameters(), strips.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-9, atol=1e-12, msg=name)


def test_strips_cover_less_than_the_dense_work_for_the_tacos_setting():
    mask = build_mask2d(128, [15, 8, 8, 8])
    conv = ProposalConv(1, 1, 5, 8, mask, strip_rows=16)
    dense_cells = sum(getattr(conv, f"weight_map_{i}").numel() for i in range(8))
    strip_cells = sum((r1 - r0) * (c1 - c0) for plan in conv.plans for r0, r1, c0, c1 in plan)
    assert strip_cells < 0.6 * dense_cells


@pytest.mark.parametrize("n,counts", [(16, [15]), (64, [15, 8, 8]), (128, [15, 8, 8, 8]), (32, [3, 2, 2, 1])])
def test_gather_built_map_equals_the_reference_pool_chain_bit_for_bit(n, counts):
    x = torch.randn(2, 5, n)
    fast, chain = SparseMaxPool2D(n, counts), PoolChainMap2D(n, counts)
    assert torch.equal(fast(x), chain(x))


def test_reference_model_with_our_weights_gives_our_scores_and_loss():
    cfg = small_cfg("MODEL.TAN.PREDICTOR.STRIP_ROWS", "4")
    torch.manual_seed(0)
    ours, reference = build_model(cfg).double(), ReferenceTAN(cfg).double()
    reference.load_state_dict(ours.state_dict())
    feats, queries, wordlens, moments, durations = random_inputs(cfg, 5)
    feats, queries = feats.double(), queries.double()
    logits, ref_logits = ours(feats, queries, wordlens), reference(feats, queries, wordlens)
    mask = ours.mask2d
    torch.testing.assert_close(logits[:, mask], ref_logits[:, mask])
    torch.testing.assert_close(ours.scores(logits), reference.scores(ref_logits).float())
    n = cfg.MODEL.TAN.NUM_CLIPS
    torch.testing.assert_close(ours.loss(logits, moments[:, None], durations).double(),
                               reference.loss(ref_logits, stored_iou2d(moments, durations, n).double()),
                               rtol=1e-6, atol=1e-7)


def test_fast_evaluation_equals_the_per_query_greedy_loop_on_random_maps_with_ties():
    gen = torch.Generator().manual_seed(1)
    for trial in range(12):
        n, counts = random.Random(trial).choice([(16, [15]), (32, [15, 8]), (64, [15, 8, 8])])
        mask = build_mask2d(n, counts)
        q = 40
        scores = ((torch.rand(q, n, n, generator=gen) * 6).round() / 6) * mask  # ties and exact zeros
        durations = torch.rand(q, generator=gen) * 60 + 1
        gt = torch.rand(q, 2, generator=gen).sort(dim=1).values * durations[:, None]
        thresh = [0.3, 0.4, 0.45, 0.5][trial % 4]
        moments, _, filled = top_moments(scores, durations, thresh, mask2d=mask, units="seconds")
        fast = evaluate_moments(moments, filled, gt)
        direct = reference_evaluate(scores, durations, gt, thresh)  # the reference's rule: IoU on seconds
        assert fast == pytest.approx(direct, abs=1e-9)
        for units in ("seconds", "clips"):
            masked, _, filled_masked = top_moments(scores, durations, thresh, mask2d=mask, units=units)
            unmasked, _, filled_unmasked = top_moments(scores, durations, thresh, units=units)
            assert torch.equal(unmasked, masked) and torch.equal(filled_unmasked, filled_masked)


class ConvDtypes(torch.overrides.TorchFunctionMode):
    """Records the output dtypes of the K x K (K > 1) 2D convolutions run inside it,
    whether through nn.Conv2d or a direct F.conv2d call (the strip path)."""

    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.nn.functional.conv2d and args[1].shape[-1] > 1:
            self.seen.add(out.dtype)
        return out


@pytest.mark.parametrize("strip_rows", ["0", "4"])
@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_mixed_precision_training_steps_run_on_cpu_and_learn(amp, strip_rows, monkeypatch):
    cfg = small_cfg("SOLVER.AMP", amp, "MODEL.TAN.PREDICTOR.STRIP_ROWS", strip_rows)
    device = torch.device("cpu")
    torch.manual_seed(0)
    model = build_model(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scaler = make_grad_scaler(amp, device)
    feats, queries, wordlens, moments, durations = random_inputs(cfg, 8)
    losses, seen = [], {}
    model.integrator.register_forward_hook(lambda m, i, o: seen.__setitem__("fused", o.dtype))
    # in training with strips the fused map reaches the predictor as its first band
    forward_band = ProposalConv.forward_band
    monkeypatch.setattr(ProposalConv, "forward_band",
                        lambda self, band, **kw: (seen.__setitem__("fused", band.dtype),
                                                  forward_band(self, band, **kw))[1])
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}[amp]
    for _ in range(12):
        with autocast(amp, device):
            logits = model(feats, queries, wordlens)
        # the convolutions and the big maps stay in the low precision (no silent
        # promotion to float32); the scoring conv gives float32 logits
        assert seen == {"fused": low} and logits.dtype == torch.float32
        # every K x K convolution of the stack (strips or dense) runs in the low precision
        with ConvDtypes() as convs, autocast(amp, device):
            model(feats, queries, wordlens)
        assert convs.seen == {low}
        loss = model.loss(logits, moments[:, None], durations)
        assert loss.dtype == torch.float32
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0] - 0.02  # the same batch is fitted
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert scaler.is_enabled() == (amp == "fp16")


@pytest.mark.slow
def test_fp16_run_saves_its_gradient_scaler_and_resumes(synthetic_root, tmp_path):
    args = ["--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(tmp_path),
            "MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.AMP", "fp16", "SOLVER.ITERS_PER_EPOCH", "3",
            "SOLVER.LOG_PERIOD", "1", "SOLVER.TEST_PERIOD", "0", "--skip-test"]
    proc = run_main("train_net", *args, "SOLVER.MAX_EPOCH", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    checkpoint = torch.load(tmp_path / "model_final.pth", weights_only=False)
    assert checkpoint["grad_scaler"]["scale"] > 0 and "grad_scaler" in checkpoint
    proc = run_main("train_net", *args, "SOLVER.MAX_EPOCH", "2", "--accept-config-changes")  # one more epoch
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming from" in proc.stdout + proc.stderr
    assert torch.load(tmp_path / "model_final.pth", weights_only=False)["epoch"] == 3


def test_every_accepted_amp_mode_has_an_autocast_dtype():
    from tan.config.choices import AMP_MODES
    from tan.engine.precision import AUTOCAST_DTYPES
    assert set(AMP_MODES) == {"off", *AUTOCAST_DTYPES}


def test_unknown_amp_mode_is_rejected_with_the_key():
    from tan.errors import TanError
    with pytest.raises(TanError, match="SOLVER.AMP.*'fp8'"):
        load_config(SYNTHETIC_CONFIG, ["SOLVER.AMP", "fp8"])


@pytest.mark.slow
def test_compiled_training_saves_plain_checkpoints(synthetic_root, tmp_path):
    """SOLVER.COMPILE wraps the model; checkpoints keep the plain parameter names."""
    args = ["--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root, "OUTPUT_DIR", str(tmp_path),
            "MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.COMPILE", "True", "SOLVER.MAX_EPOCH", "1",
            "SOLVER.ITERS_PER_EPOCH", "3", "SOLVER.TEST_PERIOD", "0", "SOLVER.LOG_PERIOD", "1"]
    proc = run_main("train_net", *args)
    if proc.returncode != 0 and "InductorError" in proc.stderr + proc.stdout:
        pytest.skip("torch.compile cannot build kernels on this machine (no working C++ compiler)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = torch.load(tmp_path / "model_final.pth", weights_only=False)["model"]
    assert not any("_orig_mod" in key for key in state)
    assert set(state) == set(build_model(load_config(SYNTHETIC_CONFIG)).state_dict())
    metrics = (tmp_path / "inference" / "model_final" / "synthetic_test" / "metrics.json").read_text()
    assert "R@1,IoU@0.5" in metrics


def test_bf16_without_bfloat16_instructions_and_fp16_on_any_cpu_are_flagged(tmp_path):
    from tan.engine.precision import amp_is_emulated, cpu_flags, slow_amp_warning

    cpu = torch.device("cpu")
    assert amp_is_emulated("bf16", cpu, flags={"avx2", "fma"})  # AVX2 only: emulated, many times slower
    assert not amp_is_emulated("bf16", cpu, flags={"avx2", "avx512f", "avx512_bf16"})
    assert not amp_is_emulated("bf16", cpu, flags={"avx2", "amx_bf16"})
    assert amp_is_emulated("fp16", cpu, flags={"avx2", "avx512_bf16"})
    assert amp_is_emulated("fp16", cpu, flags={"avx2", "avx512_fp16"})  # measured slow even with AVX512-FP16
    assert amp_is_emulated("fp16", cpu, flags=set())
    assert not amp_is_emulated("off", cpu, flags={"avx2"})
    assert not amp_is_emulated("bf16", torch.device("cuda", 0), flags={"avx2"})
    assert not amp_is_emulated("fp16", torch.device("cuda", 0), flags={"avx2"})
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu sse avx2 fma\n")
    assert cpu_flags(str(info)) == {"fpu", "sse", "avx2", "fma"}
    assert cpu_flags(str(tmp_path / "absent")) is None  # not Linux: no warning rather than a wrong one
    for amp in ("bf16", "fp16"):
        warning = slow_amp_warning(amp)
        assert f"SOLVER.AMP {amp}" in warning and "slower than float32" in warning and "SOLVER.AMP off" in warning
