"""One module per published task family."""
