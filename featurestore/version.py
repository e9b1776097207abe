"""The package version, in a module of its own: the writer records it in every store, and
importing it from the package face would make the writer import the package that imports it."""

__version__ = "0.1.0"
