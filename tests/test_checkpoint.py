import os

import pytest
import torch

from tan.config import load_config
from tan.modeling import build_model
from tan.solver import build_lr_scheduler, build_optimizer
from tan.utils.checkpoint import Checkpointer
from tan.errors import TanError

from conftest import SYNTHETIC_CONFIG


def make(*opts):
    cfg = load_config(SYNTHETIC_CONFIG, list(opts))
    model = build_model(cfg)
    optimizer = build_optimizer(cfg, model)
    return cfg, model, optimizer, build_lr_scheduler(cfg, optimizer)


def test_round_trip_restores_model_optimizer_scheduler_and_arguments(tmp_path):
    torch.manual_seed(0)
    cfg, model, optimizer, scheduler = make()
    model(torch.randn(2, 64, 128), torch.randn(2, 3, 300), torch.tensor([3, 2])).sum().backward()
    optimizer.step()
    scheduler.step()
    Checkpointer(model, optimizer, scheduler, str(tmp_path)).save("model_3e", epoch=4, iteration=99)
    assert (tmp_path / "last_checkpoint").read_text() == "model_3e.pth"  # relative to OUTPUT_DIR

    torch.manual_seed(1)
    _, other, other_opt, other_sched = make()
    arguments = Checkpointer(other, other_opt, other_sched, str(tmp_path)).load()
    assert arguments == {"epoch": 4, "iteration": 99}
    for a, b in zip(model.state_dict().values(), other.state_dict().values()):
        assert torch.equal(a, b)
    assert other_opt.state_dict()["state"][0]["step"] == optimizer.state_dict()["state"][0]["step"]
    assert other_sched.last_epoch == scheduler.last_epoch == 1


def test_moved_output_folder_still_resumes(tmp_path):
    _, model, opt, sched = make()
    Checkpointer(model, opt, sched, str(tmp_path / "a")).save("model_1e", epoch=2)
    os.rename(tmp_path / "a", tmp_path / "b")
    assert Checkpointer(model, opt, sched, str(tmp_path / "b")).load()["epoch"] == 2


@pytest.mark.parametrize("form", ["bare", "module_prefix", "wrapped"])
def test_model_weight_accepts_bare_and_ddp_state_dicts(tmp_path, form):
    _, model, _, _ = make()
    state = model.state_dict()
    obj = {"bare": state, "module_prefix": {"model": {"module." + k: v for k, v in state.items()}},
           "wrapped": {"model": state, "optimizer": {}}}[form]
    torch.save(obj, tmp_path / "w.pth")
    _, fresh, opt, sched = make()
    assert Checkpointer(fresh, opt, sched, str(tmp_path / "out")).load(str(tmp_path / "w.pth")) == {}
    for a, b in zip(state.values(), fresh.state_dict().values()):
        assert torch.equal(a, b)


def test_checkpoint_of_another_config_lists_the_mismatched_keys(tmp_path):
    _, model, _, _ = make("MODEL.TAN.PREDICTOR.HIDDEN_SIZE", "32")
    torch.save({"model": model.state_dict()}, tmp_path / "w.pth")
    _, other, _, _ = make()
    with pytest.raises(TanError, match=r"shape mismatch: predictor.convs.0.weight: checkpoint \[32, 64, 3, 3\]"):
        Checkpointer(other, save_dir=str(tmp_path / "out")).load(str(tmp_path / "w.pth"))


def test_unreadable_checkpoint_is_named(tmp_path):
    (tmp_path / "w.pth").write_bytes(b"not a checkpoint")
    _, model, _, _ = make()
    with pytest.raises(TanError, match="w.pth.*cannot be read"):
        Checkpointer(model, save_dir=str(tmp_path / "out")).load(str(tmp_path / "w.pth"))


def test_empty_weight_and_no_checkpoint_starts_fresh(tmp_path):
    _, model, opt, sched = make()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert Checkpointer(model, opt, sched, str(tmp_path)).load("") == {}
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_resuming_past_the_end_of_a_now_shorter_epoch_is_a_clear_error():
    from tan.engine.hooks import LoopPlan
    from tan.engine.state import TrainingState
    plan = LoopPlan(max_epoch=3, iters_per_epoch=4, log_period=2)
    plan.check_resume(TrainingState(epoch=2, iter_in_epoch=3))  # one batch left: fine
    with pytest.raises(TanError, match=r"iteration 5 of epoch 2.*now has 4 iterations"):
        plan.check_resume(TrainingState(epoch=2, iter_in_epoch=5))


def test_the_stop_hook_releases_the_signal_handlers_after_the_last_epoch():
    import signal
    from tan.engine.hooks import EpochCheckpointer, LoopPlan, StopOnSignal
    from tan.engine.state import TrainingState
    before = signal.getsignal(signal.SIGTERM)
    hook = StopOnSignal(LoopPlan(max_epoch=2, iters_per_epoch=4, log_period=2), EpochCheckpointer(None, 1), None)
    state = TrainingState()
    hook.before_train(state)
    try:
        assert signal.getsignal(signal.SIGTERM) != before  # caught while epochs remain
        hook.after_epoch(state, 1)
        assert signal.getsignal(signal.SIGTERM) != before
        hook.after_epoch(state, 2)  # the last: still caught through the final save
        assert signal.getsignal(signal.SIGTERM) != before
        hook.after_train(state)  # model_final.pth is saved: released before the test
        assert signal.getsignal(signal.SIGTERM) == before
    finally:
        hook.close()  # safe a second time
    assert signal.getsignal(signal.SIGTERM) == before
