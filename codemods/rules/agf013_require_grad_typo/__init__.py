"""AGF013 require-grad-typo: `t.require_grad = ...` on a tensor sets nothing autograd reads."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.semantic.grad_free import grad_free
from autograd_fix.codemods.semantic.loops import Binding, bindings, enclosing_scope, parent_map
from autograd_fix.codemods.torch_api import NAMED_PARAMETER_ITERATORS, PARAMETER_CONSTRUCTORS, PARAMETER_ITERATORS

TYPO = "require_grad"
#: near spellings of `requires_grad` seen in real code (one letter dropped, added or changed)
TYPOS = frozenset({TYPO, "required_grad", "require_grads", "requires_grads", "required_grads"})
RIGHT = "requires_grad"


class RequireGradTypo(Rule):
    """
    ## What it does
    Finds `x.require_grad = ...` (and `setattr(x, "require_grad", ...)`, and the other
    near spellings `required_grad`, `require_grads`, `requires_grads`, `required_grads`)
    where `x` is a tensor or a parameter, and corrects the attribute to `requires_grad`.

    ## Why is this bad?
    A tensor accepts any new Python attribute, so the misspelt assignment raises nothing
    and changes nothing autograd reads: `param.require_grad = False` in a loop over
    `model.named_parameters()` leaves every layer trainable (the fine-tuning freezes
    nothing), and `x.require_grad = True` leaves `x` without a gradient. It is the first
    pitfall of the founding article: parameters that silently never update, or update
    when they should not (pytorch/test-infra#4687, TorchFix's TOR002).

    ## Example
    ```python
    for name, param in model.named_parameters():
        param.require_grad = "classifier" in name
    ```

    ## Use instead
    ```python
    for name, param in model.named_parameters():
        param.requires_grad = "classifier" in name
    ```

    ## Fix safety
    Safe: the rule fires only where the semantic model shows the object is a tensor or a
    parameter (a torch factory such as `torch.zeros(...)` or a conversion of one,
    `torch.zeros(n).float()`, as the assignment that reaches the line), `nn.Parameter(...)`, a target
    of a loop over `.parameters()` / `.named_parameters()`, a module's parameter, a
    tensor that requires grad), and `requires_grad` is the attribute the author meant.
    An object of any other kind (a user class with its own `require_grad` attribute, a
    configuration namespace, `self`) is left alone; a module (`model.require_grad =
    False`) is left alone too, since `requires_grad` is no module attribute either (the
    intent there is `model.requires_grad_(False)`, which a person should choose).

    ## Verification
    The fixed flag takes effect, so training changes on purpose and parameters are not
    compared at the end. Up to the first optimizer step nothing differs (its losses and
    shared gradients equal the original's); a parameter the fix froze keeps its value;
    one with a gradient on both sides is updated in both or neither; one that newly gets
    a gradient must match finite differences.
    """

    code = "AGF013"
    name = "require-grad-typo"
    safety = Applicability.SAFE
    message = "`require_grad` is not an autograd attribute (typo of `requires_grad`): the assignment changes nothing"
    contract = Contract(
        description="the corrected flag takes effect: the first step as in the original, frozen tensors keep their value, new gradients match finite differences",
        checks=("graph_state_may_change", "requires_grad_flag_takes_effect"),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._assignments: list[tuple[cst.CSTNode, cst.BaseExpression, cst.CSTNode]] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if type(target.target) is cst.Attribute and target.target.attr.value in TYPOS:
                self._assignments.append((node, target.target.value, target.target.attr))

    def visit_Call(self, node: cst.Call) -> None:
        if not (type(node.func) is cst.Name and node.func.value == "setattr" and len(node.args) == 3):
            return
        name = node.args[1].value
        if type(name) is cst.SimpleString and name.evaluated_value in TYPOS and node.args[0].keyword is None:
            self._assignments.append((node, node.args[0].value, name))

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._assignments:
            return
        parents = parent_map(original_node, self.context.semantic.syntax)
        for statement, receiver, spelled in self._assignments:
            if not self._is_tensor(receiver, statement, parents):
                continue
            edit = Edit(spelled, _respelled)
            fix = Fix(Applicability.SAFE, (edit,), f"write `{RIGHT}`")
            wrong = spelled.value if type(spelled) is cst.Name else str(spelled.evaluated_value)  # type: ignore[attr-defined]
            message = self.message.replace(TYPO, wrong, 1)
            self.report(statement, message, fix=fix)

    def _is_tensor(self, receiver: cst.BaseExpression, statement: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
        """The semantic model's evidence that `receiver` is a tensor (never a name's spelling)."""
        imports = self.context.imports
        if type(receiver) is cst.Name and receiver.value in ("self", "cls"):
            return False
        tracking = self.context.semantic.tracking
        line = _line_of(statement, parents)
        if line is not None and self.context.semantic.likely_module(receiver, line):
            return False
        if line is not None and tracking.tracked(receiver, line) is not None:
            return True
        if type(receiver) is cst.Call:
            return _tensor_value(receiver, imports)
        if type(receiver) is not cst.Name:
            return False
        scope = enclosing_scope(statement, parents)
        found = [b for b in bindings(scope) if b.name == receiver.value]
        reaching = _reaching_assignment(found, line, parents)
        if reaching is not None:
            return _tensor_binding(reaching.kind, reaching.statement, reaching.value, receiver.value, imports)
        return bool(found) and all(_tensor_binding(b.kind, b.statement, b.value, receiver.value, imports) for b in found)


def _line_of(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> cst.CSTNode | None:
    current: cst.CSTNode | None = node
    while current is not None and type(current) is not cst.SimpleStatementLine:
        current = parents.get(id(current))
    return current


def _reaching_assignment(
    found: list[Binding], line: cst.CSTNode | None, parents: dict[int, cst.CSTNode]
) -> Binding | None:
    """The binding that certainly reaches `line`: the last earlier statement of the same
    block that binds the name, when it is a one-statement assignment (`pe =
    torch.zeros(n).float()` right before `pe.require_grad = False`, whatever `pe` is
    rebound to later). None when that statement is compound or binds in another way."""
    block = parents.get(id(line)) if line is not None else None
    if block is None or not isinstance(getattr(block, "body", None), (list, tuple)):
        return None
    siblings = list(block.body)  # type: ignore[attr-defined]
    if line not in siblings:
        return None
    owner = {id(s): s for s in siblings}
    for sibling in reversed(siblings[: siblings.index(line)]):
        here = [b for b in found if _inside(b.statement, sibling, owner, parents)]
        if not here:
            continue
        simple = type(sibling) is cst.SimpleStatementLine and len(sibling.body) == 1
        return here[-1] if simple and len(here) == 1 and here[0].kind == "assign" else None
    return None


def _inside(node: cst.CSTNode, sibling: cst.CSTNode, owner: dict[int, cst.CSTNode], parents: dict[int, cst.CSTNode]) -> bool:
    current: cst.CSTNode | None = node
    while current is not None and id(current) not in owner:
        current = parents.get(id(current))
    return current is sibling


def _tensor_value(value: cst.BaseExpression | None, imports: ImportIndex) -> bool:
    """A torch factory call (or a conversion of one: `torch.zeros(n).float()`), a
    `.detach()` / `.data`, or `nn.Parameter(...)`: its result is a tensor."""
    if value is None:
        return False
    if type(value) is cst.Call and imports.qualified_name(value.func) in PARAMETER_CONSTRUCTORS:
        return True
    return type(value) is not cst.Name and grad_free(value, imports, ())


def _tensor_binding(kind: str, statement: cst.CSTNode, value: cst.BaseExpression | None, name: str, imports: ImportIndex) -> bool:
    if kind in ("assign", "annassign"):
        return _tensor_value(value, imports)
    if kind == "for" and type(statement) is cst.For:
        return _parameter_loop_target(statement.target, statement.iter, name)
    return False


def _parameter_loop_target(target: cst.BaseExpression, iterable: cst.BaseExpression, name: str) -> bool:
    """`name` is a parameter of `for name in m.parameters()`, `for _, name in
    m.named_parameters()`, or either inside `enumerate(...)`."""
    if type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.func.value in ("enumerate", "list"):
        inner = iterable.args[0].value if iterable.args else None
        if inner is None:
            return False
        if iterable.func.value == "list":
            return _parameter_loop_target(target, inner, name)
        if type(target) in (cst.Tuple, cst.List) and len(target.elements) == 2:
            return _parameter_loop_target(target.elements[1].value, inner, name)
        return False
    if not (type(iterable) is cst.Call and type(iterable.func) is cst.Attribute):
        return False
    method = iterable.func.attr.value
    if method in PARAMETER_ITERATORS:
        return type(target) is cst.Name and target.value == name
    if method in NAMED_PARAMETER_ITERATORS and type(target) in (cst.Tuple, cst.List) and len(target.elements) == 2:
        second = target.elements[1].value
        return type(second) is cst.Name and second.value == name
    return False


def _respelled(updated: cst.CSTNode) -> cst.CSTNode:
    if type(updated) is cst.Name:
        return updated.with_changes(value=RIGHT)
    assert type(updated) is cst.SimpleString
    quote = updated.quote
    return updated.with_changes(value=f"{updated.prefix}{quote}{RIGHT}{quote}")
