"""skillbank: declarative model-skill packages for Cosmos-Reason, and the Python that makes them real."""

__version__ = "0.1.0"
