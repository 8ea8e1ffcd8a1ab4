"""Runs rules over one source text: findings, then fixes applied until nothing changes.

Flow: prefilter (no sign of PyTorch use, or no rule's trigger text in the file -> no
parse at all) -> one libcst
parse -> every selected rule in one batched traversal -> `# noqa` filtering -> fixes
applied (all of them, nested ones compose; re-run until stable, bounded) -> the result
must compile and a fresh run must find nothing left to fix, otherwise the file is left
alone and the failure reported.
"""

from __future__ import annotations

import difflib
import re
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import libcst as cst

from autograd_fix.codemods.safe_text import git_quoted
from autograd_fix.codemods.imports import add_imports
from autograd_fix.codemods.unused_imports import drop_orphaned_imports
from autograd_fix.codemods.model import Applicability, Finding, Fix
from autograd_fix.codemods.rule import Rule, RuleContext
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Vocabulary
from autograd_fix.codemods.torch_version import TorchVersion
from autograd_fix.codemods.walk import iter_children

MAX_FIX_ROUNDS = 10

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+\d+(?:\s*,\s*[A-Za-z]+\d+)*))?", re.I)


class EngineError(Exception):
    """The source could not be analysed or its fixes could not be made safe."""


class FixConflict(EngineError):
    """Two fixes edit the same node in ways that cannot both hold (one removed or replaced
    the node the other still had to edit); applying one of them alone is never done."""


@dataclass(frozen=True)
class FixOptions:
    """Which fixes the static engine applies (`--no-verify`, tests): safe ones, and unsafe
    ones with `unsafe_fixes`. With verification, `cli.verify_patches` decides per plan."""

    unsafe_fixes: bool = False
    #: the oldest PyTorch the project supports (None: assume the newest); rules read it
    #: from their context, and it holds in every round, so a later round never rewrites
    #: to an API the first round avoided
    target_torch: TorchVersion | None = None
    #: the project's role vocabulary (`[tool.autograd-fix]` `<role>-names` / `-objects`)
    roles: Vocabulary = DEFAULT_VOCABULARY

    def allows(self, fix: Fix | None) -> bool:
        return fix is not None and (fix.applicability is Applicability.SAFE or self.unsafe_fixes)

    def allows_finding(self, finding: Finding) -> bool:
        return self.allows(finding.fix)


@dataclass
class SourceResult:
    """Findings in the original text and, when fixes apply, the fixed text."""

    findings: list[Finding] = field(default_factory=list)
    fixed: str | None = None
    #: set when fixes were computed but had to be dropped (the file stays as it was).
    fix_error: str | None = None
    #: the parsed original (None when no rule's trigger occurred); findings point into it
    module: cst.Module | None = None


def parse_module(text: str) -> cst.Module:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        raise EngineError(syntax_error_message(text, error)) from None
    except RecursionError:
        raise EngineError("source nests too deeply to parse") from None


#: the native parser's own position, repeated inside its message ("error at 5:8: ...")
_LIBCST_PREFIX = re.compile(r"^(?:parser error: )?(?:error at \d+:\d+: )?")


def syntax_error_message(text: str, error: cst.ParserSyntaxError) -> str:
    """`syntax error at LINE:COL: message`, where and what `python -m py_compile` reports.

    libcst's positions are those of the token where its parser gave up, often lines
    after the real mistake (an unclosed parenthesis on line 3 reads "5:8"), and its
    message repeats yet another position; CPython names the first real error. libcst's
    own position is kept only for source CPython compiles (a libcst limitation)."""
    try:
        compile_quietly(text)
    except SyntaxError as compiled:
        line, column = compiled.lineno or 1, max(compiled.offset or 1, 1)
        return f"syntax error at {line}:{column}: {compiled.msg}"
    except (ValueError, RecursionError, MemoryError):
        pass
    message = _LIBCST_PREFIX.sub("", error.message, count=1)
    return f"syntax error at {error.raw_line}:{error.raw_column + 1}: {message} (libcst cannot parse it, although Python compiles it)"


#: a file that contains none of these does not use PyTorch (not even through a model
#: passed in), so no rule applies to it and it is not parsed at all
TORCH_USE_MARKERS = ("torch", ".eval()", ".backward(", ".train(False)")


def uses_torch(text: str) -> bool:
    return any(marker in text for marker in TORCH_USE_MARKERS)


def triggered(rules: Sequence[type[Rule]], text: str) -> tuple[type[Rule], ...]:
    """Rules that could fire on `text`: the file shows PyTorch use and one of the rule's
    trigger strings occurs (a substring test: far cheaper than a parse)."""
    if not uses_torch(text):
        return ()
    return tuple(rule for rule in rules if rule.may_fire_on(text))


def run_rules(
    module: cst.Module,
    rules: Sequence[type[Rule]],
    path: str,
    text: str | None = None,
    target_torch: TorchVersion | None = None,
    roles: Vocabulary = DEFAULT_VOCABULARY,
) -> list[Finding]:
    """All findings of `rules` on `module`, in one batched traversal, noqa applied.

    `text` is `module`'s source when the caller has it: regenerating it is a codegen pass.
    `target_torch` is the project's PyTorch floor (None: assume the newest); `roles` its
    role vocabulary.
    """
    if not rules:
        return []
    context = RuleContext(path, module, target_torch, roles, text)
    instances = [rule(context) for rule in rules]
    context.semantic.syntax.walk_batched(instances)  # the index is built once and shared
    findings = [finding for rule in instances for finding in rule.findings]
    suppressed = _noqa_map(module.code if text is None else text)
    kept = [f for f in findings if not _is_suppressed(f, suppressed)]
    kept.sort(key=lambda f: (f.span.line, f.span.column, f.code))
    return kept


def with_sites(
    module: cst.Module,
    rules: Sequence[type[Rule]],
    active: Sequence[type[Rule]],
    path: str,
    text: str | None,
    target_torch: TorchVersion | None,
    roles: Vocabulary,
    sites: Sequence[tuple[str, int]],
) -> list[Finding]:
    """The `active` rules' findings, then the fixes of `rules` at `sites` (one order for
    the check and for the plans, so plan ids agree)."""
    findings = run_rules(module, active, path, text, target_torch, roles)
    if sites:
        from autograd_fix.codemods.site_fixes import site_findings

        findings += site_findings(module, rules, path, text, sites, target_torch, roles)
    return findings


def _noqa_map(text: str) -> dict[int, frozenset[str] | None]:
    """line -> codes suppressed there (None = every code)."""
    result: dict[int, frozenset[str] | None] = {}
    if "noqa" not in text:
        return result
    for number, line in enumerate(text.splitlines(), start=1):
        match = _NOQA.search(line)
        if match:
            codes = match.group("codes")
            result[number] = None if codes is None else frozenset(c.strip().upper() for c in codes.split(","))
    return result


def _is_suppressed(finding: Finding, suppressed: dict[int, frozenset[str] | None]) -> bool:
    if finding.span.line not in suppressed:
        return False
    codes = suppressed[finding.span.line]
    return codes is None or finding.code in codes


class _EditApplier(cst.CSTTransformer):
    """Applies edits by node identity; with `paths` (ids of the targets and of every node
    above them) it does not descend into subtrees that hold no target, so a fix costs the
    depth of what it touches instead of a rebuild of the whole module."""

    def __init__(self, fixes: Iterable[Fix], paths: frozenset[int] | None = None) -> None:
        super().__init__()
        self.replacements: dict[int, list] = {}
        self.paths = paths
        for fix in fixes:
            for edit in fix.edits:
                self.replacements.setdefault(id(edit.target), []).append(edit.replace)

    def on_visit(self, node: cst.CSTNode) -> bool:
        return self.paths is None or id(node) in self.paths

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        replacers = self.replacements.get(id(original_node))
        if not replacers:
            return updated_node
        return _chain(updated_node, replacers)


def _chain(node: cst.CSTNode, replacers: list) -> object:
    """`node` after every replacer of one target, each acting on what the previous left of it.

    A replacer may keep the node in a flattened list (`FlattenSentinel([node, added])`):
    the next replacer then acts on that element and its result is spliced in its place, so
    an insertion after a statement and a rewrite of the statement itself both hold. When
    an earlier replacer removed the node (or flattened it away), a later one has nothing
    to act on: that is a conflict, raised, never half of a fix silently applied.
    """
    result: object = node
    focus: cst.CSTNode | None = node
    for replace in replacers:
        if focus is None:
            raise FixConflict("two fixes edit the same statement: one removed what the other rewrites")
        out = replace(focus)
        if result is focus:
            result = out
        else:
            assert isinstance(result, cst.FlattenSentinel)
            nodes = list(result.nodes)
            index = next(i for i, element in enumerate(nodes) if element is focus)
            if isinstance(out, cst.FlattenSentinel):
                nodes[index : index + 1] = list(out.nodes)
            elif isinstance(out, cst.RemovalSentinel):
                del nodes[index]
            else:
                nodes[index] = out
            result = cst.FlattenSentinel(nodes) if nodes else cst.RemovalSentinel.REMOVE
        if isinstance(out, cst.FlattenSentinel):
            focus = next((element for element in out.nodes if element is focus), None)
        elif isinstance(out, cst.RemovalSentinel):
            focus = None
        else:
            focus = out
    return result


def target_paths(module: cst.Module, fixes: Sequence[Fix]) -> dict[int, frozenset[int]]:
    """For each edit target of `fixes` found in `module`: the ids of the nodes on the way
    from the module down to it (itself included). One walk over the tree.

    Targets the syntactic walk does not reach (formatting nodes) are absent; a caller then
    applies those fixes with a full traversal.
    """
    wanted = {id(edit.target) for fix in fixes for edit in fix.edits}
    found: dict[int, frozenset[int]] = {}
    path: list[int] = []
    stack: list[cst.CSTNode | None] = [module]  # None marks leaving a node
    while stack and len(found) < len(wanted):
        node = stack.pop()
        if node is None:
            path.pop()
            continue
        path.append(id(node))
        if id(node) in wanted:
            found[id(node)] = frozenset(path)
        stack.append(None)
        children = list(iter_children(node))
        children.reverse()
        stack.extend(children)
    return found


class StatementCode:
    """The source of a module's top-level nodes, generated once each.

    A pruned fix pass (`apply_fixes` with `paths`) returns a module whose untouched
    top-level statements are the original node objects, so the rewritten text can reuse
    their text and generate code only for what changed: codegen of the whole module for
    every patch made the cost of one patch grow with the size of its file.
    """

    def __init__(self, module: cst.Module) -> None:
        self.module = module  # keeps the nodes alive: their ids stay theirs
        self._texts = {id(node): module.code_for_node(node) for node in (*module.header, *module.body, *module.footer)}
        #: the module's own text (as `module.code`, without a second codegen)
        self.original = self.code(module)

    def text_of(self, node: cst.CSTNode) -> str:
        """The code of one top-level node (generated unless it is one of the original's)."""
        text = self._texts.get(id(node))
        return text if text is not None else self.module.code_for_node(node)

    def join(self, pieces: Iterable[str], has_trailing_newline: bool) -> str:
        """Top-level pieces joined as `Module.code` joins them (trailing newline rules)."""
        text = "".join(pieces)
        newline = self.module.default_newline
        if has_trailing_newline:
            return text if text else newline
        return text[: -len(newline)] if text.endswith(newline) else text

    def code(self, rewritten: cst.Module) -> str:
        """`rewritten.code`, reusing the text of the nodes it shares with the original."""
        if (rewritten.default_newline, rewritten.default_indent) != (self.module.default_newline, self.module.default_indent):
            return rewritten.code
        nodes = (*rewritten.header, *rewritten.body, *rewritten.footer)
        return self.join((self.text_of(node) for node in nodes), rewritten.has_trailing_newline)


def rewrite_node(node: cst.CSTNode, fixes: Sequence[Fix], pruned: frozenset[int] | None) -> object:
    """`node` with the edits of `fixes` that lie inside it applied (a node, or a libcst
    Flatten/Removal sentinel when the node itself is replaced or removed)."""
    return node.visit(_EditApplier(fixes, pruned))


def apply_fixes(
    module: cst.Module,
    fixes: Sequence[Fix],
    paths: dict[int, frozenset[int]] | None = None,
    codes: StatementCode | None = None,
) -> str:
    """Source text of `module` with every edit of `fixes` applied in one pass.

    `paths` (from `target_paths`) lets the pass skip untouched subtrees; without it, or
    when a target is missing from it, the whole tree is traversed. `codes` (of `module`)
    lets the text of untouched statements be reused instead of generated again.
    """
    if not fixes:
        return module.code
    pruned: frozenset[int] | None = None
    if paths is not None:
        targets = [id(edit.target) for fix in fixes for edit in fix.edits]
        if all(target in paths for target in targets):
            pruned = frozenset().union(*(paths[target] for target in targets))
    rewritten = module.visit(_EditApplier(fixes, pruned))
    imports = [statement for fix in fixes for statement in fix.required_imports]
    if imports:
        rewritten = add_imports(rewritten, imports)
    rewritten = drop_orphaned_imports(module, rewritten, fixes)
    return codes.code(rewritten) if codes is not None and codes.module is module else rewritten.code


def check_source(
    text: str,
    rules: Sequence[type[Rule]],
    *,
    path: str = "<stdin>",
    options: FixOptions = FixOptions(),
    compute_fix: bool = True,
    sites: Sequence[tuple[str, int]] = (),
) -> SourceResult:
    """Lint `text`; with `compute_fix`, also produce the fixed text (or why not).

    `sites` (rule code, line) are bugs a run showed (`doctor`): each adds the rule's fix
    built at that site (`site_fixes`), after the static findings."""
    active = triggered(rules, text)
    if not active and not sites:
        return SourceResult()
    module = parse_module(text)
    findings = with_sites(module, rules, active, path, text, options.target_torch, options.roles, sites)
    result = SourceResult(findings=findings, module=module)
    if compute_fix and any(options.allows_finding(f) for f in findings):
        try:
            # all selected rules, not only those the original text triggered: a fix can
            # write what another rule's prefilter looks for (`.detach()` for AGF001)
            result.fixed = fix_until_stable(module, rules, path, options, findings, text)
        except EngineError as error:
            result.fix_error = str(error)
    return result


def non_overlapping(module: cst.Module, fixes: Sequence[Fix]) -> list[Fix]:
    """The fixes of one round: each in order, unless one of its edits targets a node that an
    earlier chosen fix's edit also targets, contains, or lies inside. Those wait for the
    next round, which re-runs the rules on the rewritten code: a rewrite that moves or
    rebuilds a statement (AGF009 folding two `.data` updates into one `with` block) would
    otherwise drop another rule's edit of the same statement.
    """
    paths = target_paths(module, fixes)
    chosen: list[Fix] = []
    taken: set[int] = set()  # the chosen fixes' targets
    above: set[int] = set()  # ... and every node on the way down to them
    for fix in fixes:
        targets = {id(edit.target) for edit in fix.edits}
        own_paths = [paths.get(target) for target in targets]
        overlaps = bool(targets & above) or any(path is None or path & taken for path in own_paths)
        if overlaps and chosen:
            continue
        chosen.append(fix)
        taken |= targets
        above |= frozenset().union(*(path for path in own_paths if path is not None))
    return chosen


def fix_until_stable(
    module: cst.Module,
    rules: Sequence[type[Rule]],
    path: str,
    options: FixOptions,
    findings: list[Finding] | None = None,
    text: str | None = None,
    validate: Callable[[str], None] | None = None,
) -> str:
    """Apply fixes round after round until a run finds nothing left to fix.

    `findings` and `text` are those of `module` when the caller already has them. Every
    rewritten text is parsed and checked by `validate` (default: compiled as one file)
    before the next round looks at it; a notebook's program is checked cell by cell, as
    Jupyter compiles it.
    """
    validate = validate_python if validate is None else validate
    text = module.code if text is None else text
    for _ in range(MAX_FIX_ROUNDS):
        if findings is None:
            # the prefilter again on each rewritten text, so that the result is what a
            # second run would leave alone (idempotence)
            findings = run_rules(module, triggered(rules, text), path, text, options.target_torch, options.roles)
        fixes = [f.fix for f in findings if options.allows_finding(f)]
        if not fixes:
            return text
        fixes = non_overlapping(module, fixes)  # type: ignore[arg-type]
        try:
            text = apply_fixes(module, fixes)
        except Exception as error:  # a rule's replacement built an invalid tree
            raise EngineError(f"a fix could not be applied ({type(error).__name__}: {error}); file left unchanged") from None
        findings = None
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:
            raise EngineError("a fix produced code that does not parse; file left unchanged") from None
        validate(text)
    raise EngineError(f"fixes did not converge after {MAX_FIX_ROUNDS} rounds; file left unchanged")


def compile_quietly(text: str) -> None:
    """`compile(text)` without its warnings: an odd literal such as `0x1for` or `"\\d"` in
    the user's code is theirs to hear about when they run it, not a stray
    "<autograd-fix>:2: SyntaxWarning" line in the tool's output (twice in `--diff`), and
    under `-W error` such a warning would become a SyntaxError that rejects a good fix."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(text, "<autograd-fix>", "exec", dont_inherit=True)


def validate_python(text: str) -> None:
    try:
        compile_quietly(text)
    except (SyntaxError, ValueError) as error:
        raise EngineError(f"a fix produced code that does not compile ({error}); file left unchanged") from None


def single_fix_diff(
    module: cst.Module,
    finding: Finding,
    path: str,
    paths: dict[int, frozenset[int]] | None = None,
    codes: StatementCode | None = None,
    bom: bool = False,
) -> str:
    """Unified diff of `finding`'s fix applied alone (the JSON output's per-finding diff);
    `paths` and `codes` as for `apply_fixes`, `bom` as for `unified_diff`."""
    if finding.fix is None:
        return ""
    after = apply_fixes(module, [finding.fix], paths, codes)
    before = codes.original if codes is not None and codes.module is module else module.code
    return unified_diff(before, after, path, bom=bom)


def git_lines(text: str) -> list[str]:
    r"""`text` split after each ``\n`` only, ends kept: the lines git sees.

    `str.splitlines` also splits at ``\r``, form feeds and other separators, which git
    keeps inside a line: a diff built from such lines would not apply to the file."""
    lines = text.split("\n")
    ended = [line + "\n" for line in lines[:-1]]
    return ended + [lines[-1]] if lines[-1] else ended


def unified_diff(before: str, after: str, path: str, bom: bool = False) -> str:
    """A `git apply`-compatible unified diff with `a/` and `b/` prefixes.

    Lines keep their own endings (a CRLF file's diff has CRLF lines, as git expects);
    `bom`: the file starts with a UTF-8 byte order mark, which git counts as part of
    the first line, so the diff's first line carries it too."""
    name = path.replace("\\", "/")
    while name.startswith("./"):
        name = name[2:]
    if bom:
        before, after = "\ufeff" + before, "\ufeff" + after
    lines = difflib.unified_diff(
        git_lines(before),
        git_lines(after),
        fromfile=git_quoted(f"a/{name}"),  # a newline or ESC in a name must not split or
        tofile=git_quoted(f"b/{name}"),    # colour the header: quoted as git does
    )
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)
