"""The Trainer: one object from the merged config to a trained and tested model.

It builds everything a run needs from the config, each part in a method a
subclass may override (as detectron2's DefaultTrainer does): the model, the
optimizer, the learning-rate schedule, the gradient scaler, the checkpointer,
the loaders and the hooks. :meth:`Trainer.train` resumes or initialises and
runs the loop: epochs of :meth:`Trainer.run_step` (forward, loss, backward,
update), with the hooks around each step and epoch (tan/engine/hooks.py):
the epoch checkpoints, the logger (losses, NaN check, ETA, metrics.jsonl,
TensorBoard), the periodic evaluation with the best model, the model's own
hooks (``hooks(cfg)``) and the stop on SIGTERM / SIGINT. The run's position
lives in one :class:`TrainingState`, saved in every checkpoint, so a resumed
run continues at the same batch with the same random streams.

A plug-in registers a subclass with :func:`register_trainer` and a config
names it in ``TRAINER`` (docs/training.md). :func:`build_trainer` is how a
tool starts a run: the trainer ``TRAINER`` names, its refusals asked before
anything is written, on the run :func:`tan.engine.setup.default_setup`
prepares.
"""
import itertools
import os
import pickle
import time
import weakref

import torch

from ..config.models import declarations
from ..config.setup import value_at
from ..errors import TanError
from ..modeling import build_model
from ..solver import (LRSchedule, apply_schedule, build_lr_scheduler, build_optimizer,
                      check_names as check_solver_names, optimizer_name, schedule_keys)
from ..utils import comm
from ..utils.checkpoint_file import FINAL, load_model_weights, model_state_from, read_checkpoint
from ..utils.logger import get_logger
from ..utils.progress import progress
from ..utils.registry import Registry
from .checkpoints import Checkpointer, last_checkpoint_file, run_info
from .hooks import (FINAL_NAME, BestModel, EpochCheckpointer, LoopPlan, PeriodicEvaluator, Step, StopOnSignal,
                    TrainingLogger, check_best_metric)
from .precision import make_grad_scaler
from .records import RunRecords, recorded_before
from .setup import default_setup
from .state import TrainingState
from .step import run_step
from .testing import test_final_and_best, windowed_evaluation
from .wrappers import maybe_compile, prepare_model, unwrap, weights_digest, wrap_distributed

TRAINERS = Registry("trainer (TRAINER)")

# What the loop needs of a loader: the training one resumes mid-epoch, an evaluation one names its
# dataset and reaches the queries' dataset (a loader of videos holds the queries of each).
_TRAIN_LOADER_NEEDS = ("sampler.resume",)
_EVAL_LOADER_NEEDS = ("dataset.name", "dataset.by_query")
_HOOK_METHODS = ("before_train", "before_epoch", "before_step", "after_step", "after_epoch", "after_train", "close")


def _shown(value):
    """A returned value as an error names it: None, or its type."""
    return "None" if value is None else f"a {_type_name(value)}"


def _type_name(value):
    return f"{type(value).__module__}.{type(value).__qualname__}"


class _Discarded:
    def write(self, data):
        return len(data)


class _PickleProbe(pickle.Pickler):
    """Pickles what torch.save would, into nothing: tensors, which torch.save writes itself, are skipped
    (a hook's EMA weights are not copied at every save to be checked)."""

    def persistent_id(self, obj):
        return "tensor" if torch.is_tensor(obj) else None


def _unsavable(value, where="state_dict()"):
    """(where, value, why) of the first value within ``value`` that pickle, which torch.save uses,
    cannot write (a lambda, a generator, an open file...), None when all of it can be saved."""
    try:
        _PickleProbe(_Discarded()).dump(value)
        return None
    except Exception as e:  # noqa: BLE001 - pickle raises many kinds for what it cannot write
        why = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
    items = (value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple))
             else ())
    for key, item in items:
        found = _unsavable(item, f"{where}[{key!r}]")
        if found is not None:
            return found
    return where, value, why


def _listed(names, shown=8):
    """Parameter names as an error lists them: the first ``shown``, then how many more."""
    return ", ".join(names[:shown]) + (f" (+{len(names) - shown} more)" if len(names) > shown else "")


def _has_path(obj, path):
    for name in path.split("."):
        if not hasattr(obj, name):
            return False
        obj = getattr(obj, name)
    return True


def _named(hooks):
    """(name, hook) for each hook: its class's name, with #2, #3... for a class listed again; the
    name its state is saved under in a checkpoint."""
    seen = {}
    for hook in hooks:
        name = type(hook).__qualname__
        seen[name] = seen.get(name, 0) + 1
        yield (name if seen[name] == 1 else f"{name}#{seen[name]}"), hook


# Keys a resumed run cannot change: its checkpoint holds the state of the optimizer and the schedule
# they chose (a trainer may build its own), which another one cannot take.
FIXED_IN_A_RUN = ("SOLVER.OPTIMIZER", "SOLVER.SCHEDULER", "TRAINER")


def register_trainer(name):
    """Class decorator: a :class:`Trainer` subclass under ``name``, the value of TRAINER that picks it."""
    return TRAINERS.register(name)


def trainer_class(cfg):
    """The registered class of TRAINER; an error listing the registered ones."""
    return TRAINERS.get(cfg.TRAINER)


def build_trainer(cfg, args):
    """The trainer TRAINER names, on a run set up for it (:meth:`Trainer.set_up`): what tan-train
    does between merging the config (:func:`tan.config.load_config`) and training."""
    return trainer_class(cfg).set_up(cfg, args)


@register_trainer("default")
class Trainer:
    """Train (and test) the model of a run: ``run`` is what :func:`tan.engine.setup.default_setup`
    prepared (the frozen config, the device, whether several processes take part, the run's data
    and, on rank 0, the locked run folder).

    The run's :class:`tan.data.RunData` builds each loader once, shared with the test that
    follows. The run folder's accepted config changes (rank 0 knows them) are applied and
    recorded once the checkpoint is restored, so that a change the checkpoint cannot take
    (another model shape) leaves config.yml as it was; a folder without config.yml gets one only
    once everything training could fail on at its start (the datasets, the word vectors,
    resuming) is behind, so a run that never started leaves none.

    After :meth:`train`, ``model`` is the trained model (wrapped for several
    processes) and ``final`` the path of its final checkpoint."""

    @classmethod
    def set_up(cls, cfg, args):
        """This trainer on a run prepared for it, from the merged config ``cfg`` and the tool's parsed
        ``args``: the model's declarations are asked once, :meth:`check_config` refuses what this
        trainer cannot train before anything is written, then :func:`tan.engine.setup.default_setup`
        checks the data, joins the process group, locks OUTPUT_DIR and starts the log. Close the
        trainer (or use it in a ``with`` block) to give the run folder back."""
        declared = declarations(cfg)
        cls.check_config(cfg, declared)
        run = default_setup(cfg, args, declared=declared)
        try:
            return cls(run)
        except BaseException:
            run.close()
            raise

    @classmethod
    def check_config(cls, cfg, declared):
        """What this trainer cannot train, refused by :meth:`set_up` before anything is written
        (``declared``: the model's :class:`tan.config.models.Declarations`): the optimizer and
        schedule names. A subclass that reads keys of its own checks them here too."""
        check_solver_names(cfg, declared.recipe)

    def __init__(self, run):
        self.run = run
        self.cfg, self.device, self.distributed, self.data = run.cfg, run.device, run.distributed, run.data
        self.folder = run.folder  # rank 0's locked OUTPUT_DIR (tan/engine/run_folder.py); None on other ranks
        declared = self.data.declared  # what the model declares, asked once when the run's data was set up
        self.model_class, self.recipe = declared.model, declared.recipe
        self.by_video = declared.batches_by_video  # videos with their sentences, or queries
        self.logger = get_logger("train")
        self.model = self.optimizer = self.schedule = self.grad_scaler = self.checkpointer = None
        self.train_loader = self.val_loaders = self.plan = self.state = None
        self.hooks = []
        # metrics.jsonl and the hooks' record files, taken back to the checkpoint a run resumes from
        self.records = RunRecords(self.cfg.OUTPUT_DIR if comm.is_main_process() else None)
        self.final = os.path.join(self.cfg.OUTPUT_DIR, FINAL)

    def close(self):
        """Give the run folder's lock back: the run is over, however it ended."""
        self.run.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def config_changes(self):
        """The accepted differences from OUTPUT_DIR/config.yml (rank 0's folder holds them; [] elsewhere)."""
        return self.folder.changes if self.folder else []

    # -- what a run is built of: override to change one part ------------------------------------

    def build_model(self):
        """The model on its device, in its memory format (not yet wrapped for several processes): the
        class the run's declarations name (MODEL.ARCHITECTURE), built from the config, with its window
        relevance head when MODEL.RELEVANCE.ENABLED."""
        return prepare_model(self.cfg, build_model(self.cfg, self.model_class).to(self.device))

    def build_optimizer(self, model):
        """SOLVER.OPTIMIZER (or the model's recipe's) over the model's parameter groups."""
        return build_optimizer(self.cfg, model, self.recipe)

    def build_scheduler(self, optimizer):
        """A torch scheduler stepped once per epoch (SOLVER.SCHEDULER); the warm-up is added on top."""
        return build_lr_scheduler(self.cfg, optimizer)

    def build_grad_scaler(self):
        return make_grad_scaler(self.cfg.SOLVER.AMP, self.device)

    def build_checkpointer(self, model, optimizer, scheduler, grad_scaler):
        return Checkpointer(model, optimizer, scheduler, self.cfg.OUTPUT_DIR, comm.is_main_process(),
                            extra={"grad_scaler": grad_scaler},
                            info=run_info(self.cfg, self.data.extractors(), self.data.trained_span()))

    def build_train_loader(self):
        return self.data.train_loader(self.distributed, self.by_video)

    def build_val_loaders(self):
        """The loaders of the periodic evaluation (None when SOLVER.TEST_PERIOD is 0)."""
        return self.data.val_loaders(self.distributed, self.by_video) if self.cfg.SOLVER.TEST_PERIOD > 0 else None

    def build_test_loaders(self):
        return self.data.test_loaders(self.distributed, self.by_video)

    def build_hooks(self):
        """The hooks of the loop, in the order they are called: the built-in ones, those the model asks
        for (``hooks(cfg)``), then the stop on a signal. A subclass adds its own with
        ``hooks = super().build_hooks(); hooks.insert(-1, MyHook()); return hooks``."""
        cfg = self.cfg
        logger = TrainingLogger(cfg, self.plan, self.optimizer, self.device, self.checkpointer, self.records)
        checkpoints = EpochCheckpointer(self.checkpointer, cfg.SOLVER.CHECKPOINT_PERIOD, self.checkpoint_fields)
        windows = windowed_evaluation(cfg, self.data.trained_span()) if self.val_loaders else None
        evaluator = PeriodicEvaluator(cfg, self.model, self.val_loaders, self.device,
                                      BestModel(cfg.TEST.BEST_METRIC, self.checkpointer), logger, windows)
        return [checkpoints, logger, evaluator, *unwrap(self.model).hooks(cfg),
                StopOnSignal(self.plan, checkpoints, logger.flush_losses)]

    def run_step(self, batch):
        """Forward, loss, backward and update for one batch; returns (loss, its named terms)."""
        return run_step(self.model, batch, self.optimizer, self.grad_scaler, self.cfg.SOLVER.AMP, self.device,
                        self.recipe.clip_grad_norm)

    def checkpoint_fields(self, state, epoch_hooks_done=False):
        """What a checkpoint holds besides the weights, the optimizer and the schedule: ``state``, the
        lengths of the run's records and the hooks' own states (:meth:`HookBase.state_dict`)."""
        return state.checkpoint_fields(records=self.records.lengths(), hooks=self._hook_states(),
                                       epoch_hooks_done=epoch_hooks_done)

    def _hook_states(self):
        """{hook name: its state_dict()} of the hooks that carry something across a resume, each checked
        to be what a checkpoint can hold and load_state_dict can take back: a dict of values the
        checkpoint's pickle can write. Checked when the run starts and at every save, so that a bad one
        ends the run with one line naming the hook, not a pickle traceback at its first checkpoint or a
        failed resume later."""
        states = {}
        for name, hook in _named(self.hooks):
            try:
                hook_state = getattr(hook, "state_dict", dict)()
            except Exception as e:  # noqa: BLE001 - a user's hook: its error, named, in one line
                raise TanError(f"hook {name} ({_type_name(hook)}): state_dict() raised {type(e).__name__}: {e} "
                               f"(docs/training.md, 'Hooks')") from e
            if not isinstance(hook_state, dict):
                raise TanError(f"hook {name} ({_type_name(hook)}): state_dict() returned {_shown(hook_state)}; it "
                               f"must return a dict ({{}} for nothing to carry), which load_state_dict() gets back "
                               f"when the run resumes (docs/training.md, 'Hooks')")
            bad = _unsavable(hook_state)
            if bad is not None:
                where, value, why = bad
                raise TanError(f"hook {name} ({_type_name(hook)}): state_dict() holds a value a checkpoint cannot "
                               f"save: {where} is {_shown(value)} ({why}); keep plain values in it (numbers, "
                               f"strings, lists, dicts, tensors) (docs/training.md, 'Hooks')")
            if hook_state:
                states[name] = hook_state
        return states

    # -- training and testing ------------------------------------------------------------------------

    def train(self):
        """Build, resume or initialise, and train to SOLVER.MAX_EPOCH; returns the final checkpoint's path."""
        cfg = self.cfg
        self.model = self._built("build_model", self.build_model(), torch.nn.Module, "a torch.nn.Module")
        has_checkpoints = last_checkpoint_file(cfg.OUTPUT_DIR) != (None, None)
        if os.path.isfile(self.final) and not has_checkpoints:
            self.logger.info("%s exists: nothing to train", self.final)  # a final model from elsewhere
            load_model_weights(self.model, model_state_from(read_checkpoint(self.final), self.final), self.final)
            self._record_config(TrainingState())
            return self.final
        self._refuse_another_optimizer(has_checkpoints)
        self.optimizer = self._built_optimizer(self.build_optimizer(self.model))
        scheduler = self._built_scheduler(self.build_scheduler(self.optimizer))
        self.grad_scaler = self._built("build_grad_scaler", self.build_grad_scaler(), torch.amp.GradScaler,
                                       "a torch.amp.GradScaler (disabled where no scaling is needed)")
        self.checkpointer = self._built(
            "build_checkpointer", self.build_checkpointer(self.model, self.optimizer, scheduler, self.grad_scaler),
            Checkpointer, "a tan.engine.checkpoints.Checkpointer")
        resumed = self.checkpointer.load(cfg.MODEL.WEIGHT)
        state = TrainingState.from_checkpoint(resumed)
        self._check_epochs(state)
        self._apply_config_changes(state, scheduler)
        self.schedule = LRSchedule.from_config(cfg, scheduler)
        if os.path.isfile(self.final) and state.epoch > cfg.SOLVER.MAX_EPOCH:
            self._record_config(state)
            if os.path.abspath(self.final) in map(os.path.abspath, self.checkpointer.unreadable):
                # model_final.pth could not be read and the run resumed from its last epoch's
                # checkpoint, which holds the same state: write the final model again from it, after the
                # epoch's hooks, which the finished run ran, with what it recorded.
                self.checkpointer.save(FINAL_NAME, **dict(resumed, epoch_hooks_done=True,
                                                          records=self.records.lengths(resumed.get("records", ()))))
                self.logger.warning("%s could not be read; written again from %s, which holds all %d epochs",
                                    self.final, self.checkpointer.loaded, cfg.SOLVER.MAX_EPOCH)
            else:
                self.logger.info("%s exists and holds all %d epochs: nothing to train", self.final,
                                 cfg.SOLVER.MAX_EPOCH)
            return self.final
        self.model = maybe_compile(cfg, wrap_distributed(self.model, self.device, self.distributed))
        self.train_loader = self._built_loader("build_train_loader", self.build_train_loader(), _TRAIN_LOADER_NEEDS)
        self.val_loaders = self._built_loaders("build_val_loaders", self.build_val_loaders(), none_allowed=True)
        self.plan = LoopPlan.from_config(cfg, self.train_loader)
        self.plan.check_resume(state)
        check_best_metric(cfg, self.val_loaders)
        # Only now, with everything the new config could fail on behind us, does the folder say it holds.
        self._record_config(state)
        # What the run recorded after the checkpoint it resumes from is done again, so it goes.
        self.records.rewind(state.records if state.iteration else {}, legacy_keep=recorded_before(state))
        try:
            self.train_loop(state)
        except BaseException:
            if self.folder and not self.checkpointer.last_checkpoint():
                # stopped before its first checkpoint: a folder it started holds no run
                if self.folder.fresh:
                    self.records.withdraw()
                self.folder.withdraw(trained=state.iteration > 0)
            raise
        return self.final

    def train_loop(self, state):
        """From ``state`` (a fresh TrainingState, or the one of a checkpoint) to SOLVER.MAX_EPOCH: the
        epochs of :meth:`run_epoch`, with the hooks before and after training."""
        self.state = state
        self._wire_hooks(state)
        self.model.train()
        state.restore_rng()
        try:
            for hook in self.hooks:
                hook.before_train(state)
            self._close_restored_epoch(state)
            for epoch in range(state.epoch, self.plan.max_epoch + 1):
                self.run_epoch(state, epoch)
            for hook in self.hooks:
                hook.after_train(state)
        finally:
            for hook in reversed(self.hooks):  # the signal handlers are released first, whatever else fails
                hook.close()

    def run_epoch(self, state, epoch):
        """One epoch from where ``state`` stands in it: :meth:`run_step` on each batch, with the hooks
        before and after each step and the epoch; the schedule steps after it."""
        plan, loader, hooks = self.plan, self.train_loader, self.hooks
        loader.sampler.resume(epoch, state.iter_in_epoch)
        for hook in hooks:
            hook.before_epoch(state, epoch)
        batches = progress(loader, total=plan.iters_per_epoch, initial=state.iter_in_epoch,
                           desc=f"epoch {epoch}/{plan.max_epoch}")
        tick = time.perf_counter()
        for batch in itertools.islice(batches, plan.iters_per_epoch - state.iter_in_epoch):
            data_time = time.perf_counter() - tick
            self.schedule.before_step(state.iteration)
            for hook in hooks:
                hook.before_step(state)
            loss, terms = self._step_result(self.run_step(batch))
            state.step_done()
            step = Step(epoch, state.iter_in_epoch, loss, data_time, time.perf_counter() - tick,
                        plan.is_sync_point(state.iter_in_epoch), terms)
            for hook in hooks:
                hook.after_step(state, step)
            tick = time.perf_counter()
        if hasattr(batches, "close"):  # a progress bar
            batches.close()
        self.schedule.step()
        state.epoch_done()
        for hook in hooks:
            hook.after_epoch(state, epoch)

    def _wire_hooks(self, state):
        """Set the run's hooks (``self.hooks``): :meth:`build_hooks`, checked, each given the trainer and
        the state ``state`` holds for it; a hook whose state no checkpoint can hold stops the run before
        it trains."""
        hooks = self._built_hooks(self.build_hooks())
        for name, hook in _named(hooks):
            hook.trainer = weakref.proxy(self)
            if name in (state.hooks or {}) and hasattr(hook, "load_state_dict"):
                try:
                    hook.load_state_dict(state.hooks[name])
                except Exception as e:  # noqa: BLE001 - a user's hook: its error, named, in one line
                    raise TanError(f"hook {name} ({_type_name(hook)}): load_state_dict() raised {type(e).__name__}: "
                                   f"{e}, on the state {self.checkpointer.loaded} holds for it; it must take back what "
                                   f"its state_dict() gave (docs/training.md, 'Hooks')") from e
        self.hooks = hooks
        self._hook_states()

    def _close_restored_epoch(self, state):
        """A checkpoint saved at an epoch's end before that epoch's hooks ran (its validation among them):
        run them now."""
        closing = state.epoch_to_close
        if closing is None:
            return
        self.logger.info("the checkpoint of epoch %d was saved before the epoch's hooks (its validation "
                         "among them) ran: running them now", closing)
        for hook in self.hooks:
            hook.after_epoch(state, closing)

    def test(self, checkpoint=None):
        """Test the final model (``checkpoint``: its path, default the run's), then model_best.pth
        when training kept one, on :meth:`build_test_loaders`; returns {"final": {dataset: metrics},
        "best": ...}. Weights evaluated already in this run (the last epoch's validation on a test
        dataset; a best model that is the final one) are not evaluated again: their results are
        written for the checkpoint that holds them."""
        loaders = self._built_loaders("build_test_loaders", self.build_test_loaders())
        checkpoint = checkpoint or self.final
        # The last epoch's validation evaluated the final weights already, on the datasets it shares
        evaluated = {}
        if os.path.abspath(checkpoint) == os.path.abspath(self.final):
            digest = weights_digest(self.model)
            for hook in self.hooks:
                # every rank must take the same decision (a rank's buffers may differ from rank 0's)
                if not comm.reduce_max_int(getattr(hook, "final_digest", None) != digest):
                    evaluated.update(hook.final_evaluations)
        return test_final_and_best(self.cfg, self.model, self.device, self.distributed, self.data, checkpoint,
                                   loaders, evaluated)

    # -- what the build methods return, checked where a subclass's mistake would surface far away -----

    def _built(self, method, value, expected, what):
        if not isinstance(value, expected):
            raise TanError(f"{type(self).__name__}.{method}() returned {_shown(value)}; it must return {what} "
                           f"(docs/training.md, 'A trainer of your own')")
        return value

    def _built_optimizer(self, optimizer):
        """An optimizer over the model's parameters: one that holds none of the model's trainable
        parameters would train nothing and end as if it had; the trainable ones it leaves out, and
        tensors of its own (a checkpoint saves the model's weights, not theirs), are named."""
        optimizer = self._built("build_optimizer", optimizer, torch.optim.Optimizer,
                                "a torch.optim.Optimizer over the model's parameters")
        held = {id(p) for group in optimizer.param_groups for p in group["params"]}
        named = list(unwrap(self.model).named_parameters())
        trainable = [name for name, p in named if p.requires_grad]
        left_out = [name for name, p in named if p.requires_grad and id(p) not in held]
        foreign = len(held - {id(p) for _, p in named})
        if not trainable:
            raise TanError(f"{type(self).__name__}.build_model() returned a model with no trainable parameter "
                           f"(every one has requires_grad False): training would change nothing")
        if len(left_out) == len(trainable):
            raise TanError(f"{type(self).__name__}.build_optimizer() returned an optimizer that holds none of the "
                           f"model's {len(trainable)} trainable parameters ({_listed(trainable)})"
                           + (f" but {foreign} tensor{'s' if foreign > 1 else ''} of its own" if foreign else "")
                           + "; training would change nothing. Build it over the model it is given "
                             "(model.parameters() or its parameter groups; docs/training.md, 'A trainer of your own')")
        if left_out:
            self.logger.warning("%s.build_optimizer() leaves %d of the model's %d trainable parameters out, which "
                                "will not be trained: %s", type(self).__name__, len(left_out), len(trainable),
                                _listed(left_out))
        if foreign:
            self.logger.warning("%s.build_optimizer() holds %d tensor(s) that are not the model's parameters: "
                                "checkpoints save the model's weights, not theirs, so a resumed run starts them "
                                "afresh", type(self).__name__, foreign)
        return optimizer

    def _built_scheduler(self, scheduler):
        scheduler = self._built("build_scheduler", scheduler, torch.optim.lr_scheduler.LRScheduler,
                                "a torch.optim.lr_scheduler scheduler of the optimizer build_optimizer returned")
        if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            raise TanError(f"{type(self).__name__}.build_scheduler() returned a ReduceLROnPlateau, which steps on a "
                           f"metric; the loop steps the scheduler once an epoch without one: return a scheduler "
                           f"of the epoch (docs/training.md, 'A trainer of your own')")
        if getattr(scheduler, "optimizer", self.optimizer) is not self.optimizer:
            raise TanError(f"{type(self).__name__}.build_scheduler() returned a scheduler of another optimizer; it "
                           f"must schedule the optimizer it is given")
        return scheduler

    def _built_loader(self, method, loader, needs, place=""):
        missing = [need for need in needs if not _has_path(loader, need)]
        if loader is None or not hasattr(loader, "__len__") or missing:
            lacking = f", which has no {' or '.join(missing)}" if loader is not None and missing else ""
            raise TanError(f"{type(self).__name__}.{method}() returned {place}{_shown(loader)}{lacking}; it must "
                           f"return a loader of the run's data, as self.data's loaders are (docs/training.md, "
                           f"'A trainer of your own')")
        return loader

    def _built_loaders(self, method, loaders, none_allowed=False):
        if loaders is None and none_allowed:
            return None
        if not isinstance(loaders, (list, tuple)):
            raise TanError(f"{type(self).__name__}.{method}() returned {_shown(loaders)}; it must return a list of "
                           f"torch DataLoaders{' (or None)' if none_allowed else ''} (docs/training.md, "
                           f"'A trainer of your own')")
        for index, loader in enumerate(loaders):
            self._built_loader(method, loader, _EVAL_LOADER_NEEDS, place=f"a list whose item {index} is ")
        return list(loaders)

    def _built_hooks(self, hooks):
        if not isinstance(hooks, (list, tuple)):
            raise TanError(f"{type(self).__name__}.build_hooks() returned {_shown(hooks)}; it must return a list "
                           f"of hooks (tan.engine.HookBase; docs/training.md, 'Hooks')")
        for index, hook in enumerate(hooks):
            missing = [m for m in _HOOK_METHODS if not callable(getattr(hook, m, None))]
            if missing:
                raise TanError(f"{type(self).__name__}.build_hooks() returned a list whose item {index} is "
                               f"{_shown(hook)}, which has no {', '.join(missing)}; a hook subclasses "
                               f"tan.engine.HookBase (docs/training.md, 'Hooks')")
        return list(hooks)

    def _step_result(self, result):
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.Tensor)
                and (result[1] is None or isinstance(result[1], dict))):
            raise TanError(f"{type(self).__name__}.run_step() returned {_shown(result)}; it must return (loss, "
                           f"terms): the loss tensor and a dict of its named terms or None (docs/training.md)")
        return result

    # -- the run folder's record and the checks of a resumed run ---------------------------------------

    def _check_epochs(self, state):
        """SOLVER.MAX_EPOCH may not end a run before what it has trained (a finished or a begun epoch)."""
        cfg = self.cfg
        begun = state.epoch - 1 + (1 if state.iter_in_epoch else 0)
        if begun > cfg.SOLVER.MAX_EPOCH:
            trained = f"{state.epoch - 1} epochs" + (f" and {state.iter_in_epoch} steps of epoch {state.epoch}"
                                                     if state.iter_in_epoch else "")
            raise TanError(f"the run in {cfg.OUTPUT_DIR} has trained {trained}; SOLVER.MAX_EPOCH "
                           f"{cfg.SOLVER.MAX_EPOCH} cannot undo that (nothing was changed); use another OUTPUT_DIR")

    def _refuse_another_optimizer(self, has_checkpoints):
        """A folder with training checkpoints continues with the optimizer, schedule and trainer it
        was trained with: refused, before anything is restored or changed, when an accepted change
        would swap one (rank 0 knows the changes; every rank takes the same decision)."""
        cfg = self.cfg
        fixed = [c for c in self.config_changes if c.key in FIXED_IN_A_RUN and
                 (c.key != "SOLVER.OPTIMIZER" or (c.old or self.recipe.optimizer) != optimizer_name(cfg, self.recipe))]
        if comm.reduce_max_int(has_checkpoints and bool(fixed)):
            raise TanError(f"the run in {cfg.OUTPUT_DIR} was trained with "
                           f"{', '.join(str(c) for c in fixed) or 'another optimizer, schedule or trainer'}: its "
                           f"checkpoints hold that one's state, so it cannot change within the run (nothing was "
                           f"changed); use another OUTPUT_DIR")

    def _apply_config_changes(self, state, scheduler):
        """A resumed run with an accepted new rate, schedule setting or momentum (rank 0 knows the
        changes; every rank applies them): restoring the optimizer and the scheduler brought back
        the old values."""
        cfg, resumed = self.cfg, state.iteration > 0
        if comm.reduce_max_int(resumed and any(c.key == "SOLVER.MOMENTUM" for c in self.config_changes)):
            for group in self.optimizer.param_groups:
                if "momentum" in group:
                    group["momentum"] = cfg.SOLVER.MOMENTUM
        keys = schedule_keys(cfg)
        if comm.reduce_max_int(resumed and any(c.key in keys for c in self.config_changes)):
            lr = apply_schedule(cfg, self.optimizer, scheduler)
            self.logger.info("learning rate from now on: %g (%s)", lr,
                             ", ".join(f"{key} {value_at(cfg, key)}" for key in keys))

    def _record_config(self, state):
        """config.yml becomes the config the next step trains with (rank 0, which holds the folder)."""
        if self.folder:
            self.folder.record(self.cfg, state, self.logger)
