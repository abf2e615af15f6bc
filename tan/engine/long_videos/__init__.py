"""Videos longer than those a model was trained on (docs/long_videos.md): cut into windows the model
takes as it took its training videos (windows), each sentence grounded in its most relevant windows
(relevance_stage) and the windows' moments merged; in tan-test, a dataset's long videos grounded that
way (windowed_evaluation). Training on such videos is the data's (tan.data.training_windows) and the
model's (its window stage: tan.modeling.relevance, tan.modeling.window_losses)."""
from . import windows  # noqa: F401  (declares the checks of TEST.WINDOW when the config is read)
