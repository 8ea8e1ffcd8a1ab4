"""One module per rule, named as the rule's module: its VALID and INVALID examples."""
