"""The published zero-shot evaluation suite (see docs/evals.md)."""
