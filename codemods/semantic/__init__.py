"""The per-file semantic model every rule asks (see `model.SemanticModel`).

The analyses live here, not in rule files: grad mode (`gradmode`), which tensors require
grad and what autograd saved (`tracking`), loops, backward and step sites (`loops`),
def-use facts (`dataflow`), which values carry a graph (`graphflow`), which attributes
hold modules (`module_values`), custom `autograd.Function` facts
(`autograd_function`), and what each name is for (`role_evidence`: evidence first, the
one token vocabulary per role of `roles` only on ties). A rule asks these questions; it
does not re-derive them.
"""
