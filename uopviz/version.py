"""The version of uopviz (its own module, so that any layer can name it without importing the package face)."""

__version__ = "0.2.0"
