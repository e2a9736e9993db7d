"""``python -m hexamer``: the same command line as ``hexamer``."""

from hexamer.cli import main

if __name__ == "__main__":
    main()
