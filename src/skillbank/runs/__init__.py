"""The ground every reader stands on: the run-folder layout (layout) and the run arithmetic (steps)."""
