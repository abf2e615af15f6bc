"""Repeatability of CPU training with several threads (docs/training.md, "Repeatability on a CPU").

torch's CPU kernels split their work among the threads by a fixed rule, so a result
depends on the number of threads but not on their timing, with one exception met in
training: float32 index_put_ with accumulation (the backward of ``x[..., index]``) on
32768 elements or more adds its terms with atomic additions from all the threads at
once. Where two threads' shares of the work add into one element, the order of those
additions, and so the last bits of the sum, depend on which thread gets there first:
on a machine with other work beside it, two runs of the same training part. Training
does no such sum: these tests look for one in a training step of 2D-TAN, MMN and
MS-2D-TAN (whatever the CPU and however the process was started), and check that the
steps that had one
(the pooled 2D map's backward, MMN's video-to-sentence term, the sentences' maps of
a batch of videos) now give the same bits at any number of threads and every time.
"""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from benchmarking.mmn_workloads import random_video_batch
from tan.config import load_config
from tan.config.setup import merge_overrides
from tan.modeling import build_model
from tan.modeling.map2d.feat2d import SparseMaxPool2D

from conftest import torch_threads
from test_band import MMN_CONFIG, gradients, map_opts, mmn_model, tan_batch, tan_model

# index_put_'s size from which its float32 accumulation runs on several threads with atomics
# (torch's internal::GRAIN_SIZE)
PARALLEL_ELEMENTS = 32768
# A thread count whose shares split rows of the pooled map's table (each row being one
# thread's is what makes a sum's order fixed); more threads than cores is allowed.
ODD_THREADS = 7
MAP = (16, [7, 4], 3, 4, 16)  # N, pooling counts, K, layers, strip rows
MS2DTAN_CONFIG = MMN_CONFIG.replace("mmn_synthetic", "ms2dtan_synthetic")


def atomic_sums(step):
    """The index_put_ with accumulation of PARALLEL_ELEMENTS terms or more that ``step()`` runs,
    autograd's included: the sums whose order the threads' timing sets. Each: the shapes of
    (the tensor summed into, the terms)."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    found = []
    for event in prof.events():
        if event.name == "aten::_index_put_impl_":
            shapes, flags = event.input_shapes, event.concrete_inputs
            if flags[3] and torch.Size(shapes[2]).numel() >= PARALLEL_ELEMENTS:
                found.append((shapes[0], shapes[2]))
    return found


def test_atomic_sums_are_found_autograds_included():
    x = torch.zeros(8, 64, 80, requires_grad=True)
    index = torch.arange(110) % 80  # 8 x 64 x 110 terms, some into one element
    assert atomic_sums(lambda: x[..., index].sum().backward()) == [([8, 64, 80], [8, 64, 110])]
    assert atomic_sums(lambda: x[:1, :, index].sum().backward()) == []  # too few: one thread, in order
    assert atomic_sums(lambda: x.detach()[..., index].sum()) == []  # no gradient, no sum


@pytest.mark.parametrize("sentences_per_video", [1, 2])
def test_a_2dtan_training_step_leaves_no_sums_order_to_the_threads(sentences_per_video):
    # hidden 64 and 6 sentences: 6 x 64 x 110 gradient terms into the pooled map's table, and
    # (for videos of 2 sentences) 6 x 64 x 16 x 16 into the 3 videos' fused maps
    cfg, model = tan_model(MAP, torch.float32, *map_opts("TAN", *MAP, hidden=64))
    batch = tan_batch(cfg, 6, torch.float32, sentences_per_video=sentences_per_video)
    assert atomic_sums(lambda: gradients(model, batch)) == []


def test_an_mmn_training_step_leaves_no_sums_order_to_the_threads():
    cfg = load_config(MMN_CONFIG, merge_overrides(map_opts("MMN", *MAP, hidden=64), [
        "MODEL.MMN.TEXT_ENCODER.NAME", "LSTM", "MODEL.MMN.JOINT_SPACE_SIZE", "8",
        "MODEL.MMN.TEXT_ENCODER.LSTM.HIDDEN_SIZE", "8", "INPUT.PRE_QUERY_SIZE", "300"]))
    torch.manual_seed(0)
    model = build_model(cfg).train()
    model.set_epoch(1)
    batch = random_video_batch(cfg, 6, 2, torch.device("cpu"))  # 6 x 64 x 110 terms into the pooled map's table
    batch["feats"] = batch["feats"][:, :, :24].contiguous()
    assert atomic_sums(lambda: gradients(model, batch)) == []


@pytest.mark.slow  # a step of the synthetic MS-2D-TAN takes seconds
def test_an_ms2dtan_training_step_leaves_no_sums_order_to_the_threads():
    from benchmarking.ms2dtan_workloads import random_batches
    cfg = load_config(MS2DTAN_CONFIG)
    torch.manual_seed(0)
    model = build_model(cfg).train()
    batch = random_batches(cfg, 4, torch.device("cpu"))["train"]["ours"]
    assert atomic_sums(lambda: gradients(model, batch)) == []


def pooled_map_gradient(threads, batch=5, hidden=64):
    pool = SparseMaxPool2D(16, [7, 4])
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, hidden, 16, generator=gen).requires_grad_(True)
    grad = torch.randn(batch, hidden, 16, 16, generator=gen)
    with torch_threads(threads):
        pool(x).backward(grad)
    return x.grad


def test_the_pooled_maps_gradient_is_the_same_bits_at_any_number_of_threads_every_time():
    # 5 x 64 rows of 110 terms on 7 threads: the shares split rows, which autograd's own
    # backward of the indexing summed with atomics in an order set by the threads' timing
    # (differing from one thread's result in 20 runs of 20 on a busy 2-core machine)
    assert 5 * 64 * len(SparseMaxPool2D(16, [7, 4]).left) >= PARALLEL_ELEMENTS
    one = pooled_map_gradient(1)
    for _ in range(10):
        assert torch.equal(pooled_map_gradient(ODD_THREADS), one)
    assert torch.equal(pooled_map_gradient(2), one)


def test_mmn_contrastive_terms_give_the_same_bits_every_time_on_several_threads():
    # MutualMatchingLoss.contrastive at a size where the indexing of its video-to-sentence term
    # would be summed on several threads (64 sentences x 8 positive cells x 64 sentences),
    # sentences of a video sharing positive cells
    model, _ = mmn_model(MAP, torch.float32, "MODEL.MMN.LOSS.NUM_POSTIVE_VIDEO_PROPOSAL", "8")
    s, v, c = 64, 16, 110
    gen = torch.Generator().manual_seed(0)
    video_index = torch.arange(v).repeat_interleave(s // v)
    ious = torch.rand(4, c, generator=gen)[video_index % 4]  # a video's sentences share their positive cells
    starts = torch.rand(s, generator=gen) * 10
    windows = torch.stack([starts, starts + 5], dim=1)[:, None, :]
    match = torch.randn(s, v, c, generator=gen)
    assert s * model.criterion.num_positives * s >= PARALLEL_ELEMENTS

    def gradient():
        m = match.clone().requires_grad_(True)
        sum(model.criterion.contrastive(m, ious, windows, video_index)).backward()
        return m.grad

    assert atomic_sums(gradient) == []
    with torch_threads(ODD_THREADS):
        first = gradient()
        assert all(torch.equal(gradient(), first) for _ in range(5))


def test_a_2dtan_training_step_repeated_on_several_threads_gives_the_same_gradients():
    # The whole step, repeated: on a fixed number of threads every kernel of the step gives
    # the same bits each time (the conv's weight gradient depends on how many threads there
    # are, not on their timing).
    cfg, model = tan_model(MAP, torch.float32, *map_opts("TAN", *MAP, hidden=64))
    batch = tan_batch(cfg, 6, torch.float32)
    with torch_threads(ODD_THREADS):
        first = gradients(model, batch)
        for _ in range(4):
            loss, grads, _ = gradients(model, batch)
            assert torch.equal(loss, first[0])
            assert all(torch.equal(grads[name], first[1][name]) for name in first[1])
