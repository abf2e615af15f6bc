"""What a hook of the training loop is (tan/engine/trainer.py calls them).

It lives here, below every other layer, so that a model's package can give
the loop hooks of its own (``GroundingModel.hooks``) without importing the
engine. ``state`` is the run's TrainingState (epoch, iteration); ``step``
the finished step's losses and timings.
"""


class HookBase:
    def before_train(self, state):
        pass

    def before_epoch(self, state, epoch):
        """Before the first batch of ``epoch`` (also the epoch a resumed run continues)."""

    def before_step(self, state):
        """Before each step (``state.iteration`` steps are done)."""

    def after_step(self, state, step):
        pass

    def after_epoch(self, state, epoch):
        pass

    def after_train(self, state):
        pass

    def close(self):
        pass
