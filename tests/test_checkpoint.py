import os

import pytest
import torch

from tan.config import load_config
from tan.modeling import build_model
from tan.solver import build_lr_scheduler, build_optimizer
from tan.engine.checkpoints import Checkpointer
from tan.errors import TanError

from conftest import SYNTHETIC_CONFIG


def make(*opts):
    cfg = load_config(SYNTHETIC_CONFIG, list(opts))
    model = build_model(cfg)
    optimizer = build_optimizer(cfg, model, model.recipe(cfg))
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


def test_training_checkpoints_are_ordered_by_the_progress_their_names_and_fields_record(tmp_path):
    from tan.engine.checkpoints import latest_checkpoint, progress_of_name, training_checkpoints

    assert progress_of_name("model_3e.pth") == (4, 0)  # epoch 3 done: epoch 4 is next
    assert progress_of_name("model_3e_17it.pth") == (3, 17)  # 17 steps into epoch 3
    assert progress_of_name("model_best.pth") is None and progress_of_name("model_3e.pt") is None
    _, model, opt, sched = make()
    saver = Checkpointer(model, opt, sched, str(tmp_path))
    for name, epoch, steps in (("model_10e", 11, 0), ("model_2e", 3, 0), ("model_9e_4it", 9, 4),
                               ("model_final", 11, 0), ("model_9e", 10, 0)):
        saver.save(name, epoch=epoch, iteration=0, **({"iter_in_epoch": steps} if steps else {}))
    saver.save_weights("model_best")
    for name in ("model_2e.pth", "model_10e.pth"):  # file times say nothing: the oldest file is now the newest
        os.utime(tmp_path / name, (1e9, 1e9))
    os.utime(tmp_path / "model_2e.pth")
    assert [os.path.basename(p) for _, p in training_checkpoints(str(tmp_path))] == [
        "model_final.pth", "model_10e.pth", "model_9e.pth", "model_9e_4it.pth", "model_2e.pth"]
    (tmp_path / "model_final.pth").write_bytes(b"PK\x03\x04 cut short")
    (tmp_path / "last_checkpoint").write_text("model_final.pth")
    path, checkpoint, warning = latest_checkpoint(str(tmp_path))
    assert os.path.basename(path) == "model_10e.pth" and checkpoint["epoch"] == 11
    assert warning.startswith(f"checkpoint '{tmp_path / 'model_final.pth'}' cannot be read: it is truncated")
    assert warning.endswith(f"falling back to the latest readable checkpoint in training order, "
                            f"{tmp_path / 'model_10e.pth'}")
    (tmp_path / "last_checkpoint").write_text("model_9e_4it.pth")
    with pytest.raises(TanError, match=r"names model_9e_4it.pth \(saved in epoch 9 after 4 steps\), but "
                                       r"model_10e.pth, saved later in training \(after epoch 10\), is there"):
        latest_checkpoint(str(tmp_path))
    # a tool that only reads (tan-test) takes what last_checkpoint names
    assert os.path.basename(latest_checkpoint(str(tmp_path), resuming=False)[0]) == "model_9e_4it.pth"


def test_a_save_cut_before_the_marker_is_taken_and_a_marker_set_back_by_hand_is_not(tmp_path, monkeypatch):
    """A checkpoint whose save stopped between its rename and last_checkpoint's write is taken (it records the
    marker exactly as it still is); the same marker text written again by hand, or put back as a copy with
    its times kept, is a user going back, and refused."""
    import shutil

    from tan.engine.checkpoints import checkpointer, latest_checkpoint

    _, model, opt, sched = make()
    saver = Checkpointer(model, opt, sched, str(tmp_path))
    saver.save("model_1e", epoch=2, iteration=4)
    kept = tmp_path / "kept_marker"
    shutil.copy2(tmp_path / "last_checkpoint", kept)  # its times kept, as cp -p keeps them

    def cut(*_):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(checkpointer, "atomic_write_text", cut)
    with pytest.raises(TanError, match=r"saved checkpoint .*model_2e.pth, but cannot write .*last_checkpoint to name "
                                       r"it \(No space left on device\); the checkpoint is whole: the same command "
                                       r"resumes from it"):
        saver.save("model_2e", epoch=3, iteration=8)
    monkeypatch.undo()
    assert (tmp_path / "last_checkpoint").read_text() == "model_1e.pth"
    path, checkpoint, warning = latest_checkpoint(str(tmp_path))
    assert os.path.basename(path) == "model_2e.pth" and checkpoint["epoch"] == 3
    assert warning == (f"{tmp_path / 'last_checkpoint'} names model_1e.pth, but model_2e.pth was saved after it, "
                       f"whole, by a save stopped before it could update last_checkpoint: taking model_2e.pth")
    for set_back in ("written", "copied"):
        if set_back == "written":
            (tmp_path / "last_checkpoint").write_text("model_1e.pth")  # the same text, by hand
        else:
            os.unlink(tmp_path / "last_checkpoint")
            shutil.copy2(kept, tmp_path / "last_checkpoint")
        with pytest.raises(TanError, match=r"names model_1e.pth \(saved after epoch 1\), but model_2e.pth, saved "):
            latest_checkpoint(str(tmp_path))


def test_a_cut_save_after_a_finished_run_was_continued_is_taken(tmp_path, monkeypatch):
    """last_checkpoint names model_final.pth, which only its fields place in training: a finished run
    continued to more epochs, cut in its next save, resumes from that save."""
    from tan.engine.checkpoints import checkpointer, latest_checkpoint

    _, model, opt, sched = make()
    saver = Checkpointer(model, opt, sched, str(tmp_path))
    saver.save("model_2e", epoch=3, iteration=8)
    saver.save("model_final", epoch=3, iteration=8)
    monkeypatch.setattr(checkpointer, "atomic_write_text", lambda *_: (_ for _ in ()).throw(OSError(28, "full")))
    with pytest.raises(TanError):
        saver.save("model_3e", epoch=4, iteration=12)
    monkeypatch.undo()
    path, checkpoint, _ = latest_checkpoint(str(tmp_path))
    assert os.path.basename(path) == "model_3e.pth" and checkpoint["epoch"] == 4
