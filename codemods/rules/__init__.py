"""One rule per module, `agfNNN_<pattern>.py`; discovered by `codemods.registry`."""
