"""Benchmarks behind ``hexamer bench``: each measures hexamer and its peers in the same run."""
