"""The per-file semantic model every rule asks (see `model.SemanticModel`).

The analyses two or more rules share live here (an analysis only one rule uses lives in
that rule's package, `codemods/rules/agfNNN_<name>/`; `tests/test_code_shape.py` counts
each module's rule users from imports): grad mode (`gradmode`), which tensors require
grad and what autograd saved (`tracking`), loops, backward and step sites (`loops`),
def-use facts (`dataflow`), which values carry a graph (`graphflow`), which attributes
hold modules (`module_values`), custom `autograd.Function` facts (`autograd_function`),
and what each name is for (`role_evidence`: evidence first, the one token vocabulary per
role of `roles` only on ties). Each question has one implementation, answered yes / no /
unknown (`answer.Answer`) where a reading may not tell: is this class an nn.Module
(`nn_modules`), is this call in-place (`inplace`). A rule asks these questions; it does
not re-derive them.
"""
