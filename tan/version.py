"""The package's version (pyproject.toml says the same), written into every checkpoint."""
__version__ = "0.1.0"
