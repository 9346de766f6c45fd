"""AutoML: Optuna search over the hyperparameters a model skill's train schema marks as searchable."""

ALGORITHMS = ("bayesian", "random", "hyperband", "asha", "grid")  # grid: lists of choices only, each combination once
DEFAULT_ALGORITHM = "bayesian"
DEFAULT_TRIALS = 8  # finished trials (complete or pruned) of a study, baseline included: `skillbank automl` and train's handoff
