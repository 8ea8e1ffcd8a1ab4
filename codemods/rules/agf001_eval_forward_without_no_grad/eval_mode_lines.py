"""Forward lines inside training code: do their graphs die there? (AGF001's analysis)

`G.eval(); samples.append(G(fixed_z)); G.train()` inside an epoch loop keeps every
sample's graph for the whole run. Such a run of lines may be wrapped in
`torch.no_grad()` only when nothing the lines make reaches a gradient use, in this
iteration or a later one (`result_flow` follows the loop), and the inputs of their
forwards are not themselves meant for gradients (`x.requires_grad_()`, `x.grad`: a
saliency map or an adversarial example needs the graph back to the input).
The same holds, in any mode, for an RL rollout's `prob = model.pi(s)` or a target
network's forward read only through `.detach()` (`dead_forward_line`). Also here: which
statements of a block a `with torch.no_grad():` must cover (`forward_region`).
"""

from __future__ import annotations

from typing import Callable, Sequence

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import last_segment
from autograd_fix.codemods.semantic.autograd_function import rebound_names
from autograd_fix.codemods.semantic.dataflow import REACHES_SINK, RETURNED, result_flow
from autograd_fix.codemods.rules.agf001_eval_forward_without_no_grad.gradreach import graph_reaches_gradient
from autograd_fix.codemods.semantic.module_calls import ModelCalls
from autograd_fix.codemods.torch_api import PYTHON_VALUE_MODULES
from autograd_fix.codemods.walk import SyntaxIndex, iter_descendants


def local_bindings(function: cst.FunctionDef, syntax: SyntaxIndex | None = None) -> set[str]:
    """The names `function` binds itself (parameters, assignments, loops, `with ... as`);
    read off the file's index when given."""
    params = function.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    names |= {star.name.value for star in (params.star_arg, params.star_kwarg) if type(star) is cst.Param}
    return names | rebound_names([function.body], syntax)


def _input_names(call: cst.Call) -> set[str]:
    return {name for arg in call.args if (name := dotted_name(arg.value)) is not None}


def _wants_input_gradients(function: cst.FunctionDef, inputs: set[str]) -> bool:
    """Whether the function asks for gradients of one of `inputs`: `x.requires_grad_()`,
    `x.requires_grad = True`, or a read of `x.grad`."""
    for node in iter_descendants(function.body):
        if type(node) is cst.Attribute and node.attr.value in ("requires_grad_", "requires_grad", "grad"):
            if dotted_name(node.value) in inputs:
                return True
    return False


def graphs_die_in_lines(
    function: cst.FunctionDef,
    lines: Sequence[cst.CSTNode],
    is_forward: Callable[[cst.Call], bool],
    sink: Callable[[cst.CSTNode], bool],
    syntax: SyntaxIndex,
    returned_to_training: bool,
) -> bool:
    """True when no forward of `lines` (a call `is_forward` accepts) makes a value that
    reaches `sink` (a gradient use) later, none is returned to a caller that trains
    (`returned_to_training`), and none takes inputs the function wants gradients of."""
    inputs: set[str] = set()
    for line in lines:
        for call in iter_descendants(line):
            if type(call) is not cst.Call or not is_forward(call):
                continue
            flow = result_flow(function, call, sink, syntax)
            if flow == REACHES_SINK or (flow == RETURNED and returned_to_training):
                return False
            inputs |= _input_names(call)
    return not (inputs and _wants_input_gradients(function, inputs))


def dead_forward_line(
    container: cst.FunctionDef | cst.Module,
    statement: cst.CSTNode,
    imports: ImportIndex,
    is_forward: Callable[[cst.Call], bool],
    sink: Callable[[cst.CSTNode], bool],
    syntax: SyntaxIndex | None = None,
) -> bool:
    """A simple statement of training code (`container` takes gradients) whose forwards'
    graphs all die: `prob = model.pi(s)` of an RL rollout whose action leaves through
    `.item()`, `next_q = target(s2)` read only through `.data` or `.detach()` before the
    loss. Followed in control-flow order (`gradreach`), later iterations included; a value
    returned, stored anywhere but a local name, or read by a gradient use keeps it alive.
    A forward whose result the statement drops (`model.put_data(...)`) makes nothing here,
    and forwards of inputs the container wants gradients of are left alone."""
    if type(statement) is not cst.SimpleStatementLine or sink(statement):
        return False
    if any(type(small) in (cst.Return, cst.Global, cst.Nonlocal) for small in statement.body):
        return False
    dropped = {id(small.value) for small in statement.body if type(small) is cst.Expr}
    prune = lambda node: type(node) is cst.Lambda  # noqa: E731
    descendants = syntax.descendants if syntax is not None else iter_descendants  # (the file's index, when given)
    forwards = [call for call in descendants(statement, prune)
                if type(call) is cst.Call and id(call) not in dropped and is_forward(call)]
    if not forwards:
        return False
    inputs = set().union(*(_input_names(call) for call in forwards))
    if type(container) is cst.FunctionDef and inputs and _wants_input_gradients(container, inputs):
        return False
    ids = {id(call) for call in forwards}
    return not graph_reaches_gradient(container, statement, imports, sink, lambda call: id(call) in ids)


def may_return_tensor(function: cst.FunctionDef, imports: ImportIndex | None = None) -> bool:
    """Does some `return` hand back something that may be a tensor with a graph?

    Literals, None, and values ending in `.item()` / `float(...)` and the like do not, nor
    (given the file's `imports`) a call of Python's own `random` or `math` modules.
    """
    for node in iter_descendants(function.body, prune=lambda n: type(n) in (cst.FunctionDef, cst.Lambda)):
        if type(node) is cst.Return and node.value is not None:
            value = node.value
            if type(value) in (cst.Integer, cst.Float, cst.SimpleString) or (
                type(value) is cst.Name and value.value in {"None", "True", "False"}
            ):
                continue
            if type(value) is cst.Call and last_segment(value.func) in TO_PYTHON:
                continue
            qualified = imports.qualified_name(value.func) if imports is not None and type(value) is cst.Call else None
            if qualified is not None and qualified.split(".", 1)[0] in PYTHON_VALUE_MODULES:
                continue  # `random.randint(0, 1)`: an epsilon-greedy action
            return True
        if type(node) is cst.Yield:
            return True
    return False


#: calls whose result is a Python value, not a tensor that could carry a graph
TO_PYTHON = frozenset({"item", "tolist", "numpy", "float", "int", "bool", "len", "str", "round"})


# -- where AGF001's `with torch.no_grad():` goes ---------------------------------------

#: statements `first..last` of a block: what a `with torch.no_grad():` must cover
Region = tuple[cst.IndentedBlock, int, int]


def child_blocks(statement: cst.CSTNode) -> list[cst.BaseSuite]:
    if type(statement) is cst.If:
        orelse = statement.orelse
        extra = [cst.IndentedBlock(body=[orelse])] if type(orelse) is cst.If else ([orelse.body] if orelse else [])
        return [statement.body, *extra]
    blocks = [statement.body, *(handler.body for handler in statement.handlers)]
    blocks += [part.body for part in (statement.orelse, statement.finalbody) if part is not None]
    return blocks


def forward_region(block: cst.BaseSuite, calls: ModelCalls) -> Region | None:
    """The statements a `with torch.no_grad():` must cover: from the first to the last
    statement that runs a model, in the innermost block holding every such call (the
    body of the inner loop over a loader). Everything computed from their outputs then
    carries no graph either."""
    while type(block) is cst.IndentedBlock:
        hits = [i for i, statement in enumerate(block.body) if calls.runs_model(statement)]
        if not hits:
            return None
        inner = _only_inner_block(block.body[hits[0]], calls) if len(hits) == 1 else None
        if inner is None:
            return block, hits[0], hits[-1]
        block = inner
    return None


def _only_inner_block(statement: cst.CSTNode, calls: ModelCalls) -> cst.BaseSuite | None:
    """The one block of a `for`/`while`/`with`/`if` whose statements run the model, when
    its header runs none."""
    if type(statement) in (cst.For, cst.While):
        header = statement.iter if type(statement) is cst.For else statement.test
        blocks = [statement.body] + ([statement.orelse.body] if statement.orelse else [])
    elif type(statement) is cst.If:
        header, blocks = statement.test, child_blocks(statement)
    elif type(statement) is cst.With:
        header, blocks = cst.Tuple([cst.Element(item.item) for item in statement.items]), [statement.body]
    else:
        return None
    running = [block for block in blocks if calls.runs_model(block)]
    if calls.runs_model(header) or len(running) != 1 or type(running[0]) is not cst.IndentedBlock:
        return None
    if type(statement) is cst.If and running[0] is not statement.body and type(statement.orelse) is not cst.Else:
        return None  # an `elif` chain: its block is not a statement list of this tree
    return running[0]
