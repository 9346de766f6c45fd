"""Routing: automl_policy (explicit or read from the request) -> direct training, AutoML, or the model skill."""
