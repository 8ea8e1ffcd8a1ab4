"""Differential execution: run the original and the rewritten code, compare, decide."""
