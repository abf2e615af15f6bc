"""What a hook of the training loop is (tan/engine/trainer.py calls them).

It lives here, below every other layer, so that a model's package can give
the loop hooks of its own (``GroundingModel.hooks``) without importing the
engine. ``state`` is the run's TrainingState (epoch, iteration); ``step``
the finished step's losses and timings.
"""


class HookBase:
    """The loop sets ``trainer`` (a weak proxy of the running Trainer) before ``before_train``;
    docs/training.md ("Hooks") says when each method is called and what it may use."""

    trainer = None

    def state_dict(self):
        """What this hook carries across a resume (plain values), saved in every checkpoint; {}: nothing."""
        return {}

    def load_state_dict(self, state):
        """Take back what :meth:`state_dict` gave, when a run resumes from a checkpoint that holds it."""

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
