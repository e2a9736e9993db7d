"""The ``hexamer`` command line: a thin layer over the Python API."""

from hexamer.cli.app import app, main

__all__ = ["app", "main"]
