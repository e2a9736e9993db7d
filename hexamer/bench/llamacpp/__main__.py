"""``python -m hexamer.bench.llamacpp _convert CONVERTER FOLDER [converter args]``: see
:func:`hexamer.bench.llamacpp.tokenizer._convert_main`."""

import sys

from hexamer.bench.llamacpp.tokenizer import _convert_main

if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "_convert":
        sys.exit(_convert_main(sys.argv[2:]))
    sys.exit("usage: python -m hexamer.bench.llamacpp _convert CONVERTER FOLDER [--outfile F --outtype T]")
