"""Models: what a model reference is made of (parameters counted from its config.json, the bundled configs)."""
