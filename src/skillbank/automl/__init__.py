"""AutoML: Optuna search over the hyperparameters a model skill's train schema marks as searchable."""
