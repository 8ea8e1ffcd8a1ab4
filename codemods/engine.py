"""Runs rules over one source text: findings with fixes as data, then fix rounds.

Flow: prefilter (no sign of PyTorch use, or no rule's trigger text in the file -> no
parse at all) -> one libcst parse -> every selected rule in one batched traversal ->
`# noqa` filtering -> each finding's fix made data once (`materialized`: node edits ->
`TextFix`) -> with fixes wanted, `fix_rounds.fix_rounds`: compose, check, re-run the rules
on the new text, until a round has nothing left to apply (bounded). A fix whose result
does not compile is dropped with a note; a round whose text libcst cannot parse is
dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import gc
import re
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import libcst as cst

from autograd_fix.codemods.safe_text import git_quoted
from autograd_fix.codemods.imports import add_imports
from autograd_fix.codemods.model import AnyFix, Applicability, Finding, Fix, TextFix
from autograd_fix.codemods.project_index import ProjectIndex
from autograd_fix.codemods.python_syntax import compile_quietly, syntax_problem
from autograd_fix.codemods.registry import SelectedRules, codes_of
from autograd_fix.codemods.rule import Rule, RuleContext
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Vocabulary
from autograd_fix.codemods.torch_api import TORCH_USE_MARKERS, uses_torch  # noqa: F401 - engine's API
from autograd_fix.codemods.torch_version import TorchVersion
from autograd_fix.codemods.walk import iter_children

MAX_FIX_ROUNDS = 10

#: a comment line `# autograd-fix: noqa` (every code) or `# autograd-fix: noqa: AGF001, AGF009`
#: anywhere in a file suppresses those codes in the whole file (Ruff's `# ruff: noqa`)
_FILE_NOQA = re.compile(
    r"^[ \t]*#[ \t]*autograd-fix:[ \t]*noqa(?::[ \t]*(?P<codes>[A-Za-z]+\d+(?:[ \t]*,[ \t]*[A-Za-z]+\d+)*))?[ \t]*$",
    re.I | re.M,
)
#: the key of `_noqa_map` for a file-level noqa
FILE_NOQA_LINE = 0
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
    #: the run's project index (`codemods.project_index`), built once before the files
    #: are checked; None: each file is analysed on its own
    project: ProjectIndex | None = field(default=None, compare=False)

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
    #: the parsed original (None when no rule's trigger occurred)
    module: cst.Module | None = None
    #: findings that appeared only after an earlier round's fixes (`fix_rounds.FollowOn`)
    follow_ons: list = field(default_factory=list)
    #: per-file notes of the fix rounds (a fix dropped because its result did not compile)
    notes: list[str] = field(default_factory=list)
    #: `id()` of each finding whose fix is in `fixed`
    applied: set[int] = field(default_factory=set)


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




def triggered(rules: Sequence[type[Rule]], text: str) -> tuple[type[Rule], ...]:
    """Rules that could fire on `text`: the file shows PyTorch use and the rule's
    prefilter admits it (`codemods/prefilters.py`: substring tests and a regex, far
    cheaper than a parse)."""
    if not uses_torch(text):
        return ()
    if isinstance(rules, SelectedRules):  # imports only the rules it answers
        return rules.triggered(text)
    return tuple(rule for rule in rules if rule.may_fire_on(text))


def _admitted_rules(rules: Sequence[type[Rule]], codes: Sequence[str]) -> tuple[type[Rule], ...]:
    """The rules of `rules` with the given `codes` (known to be `triggered`), in `rules`'
    order, importing only those of a `SelectedRules`."""
    if isinstance(rules, SelectedRules):
        return rules.load(codes)
    wanted = set(codes)
    return tuple(rule for rule in rules if rule.code in wanted)


def run_rules(
    module: cst.Module,
    rules: Sequence[type[Rule]],
    path: str,
    text: str | None = None,
    target_torch: TorchVersion | None = None,
    roles: Vocabulary = DEFAULT_VOCABULARY,
    project: ProjectIndex | None = None,
    enabled: Sequence[str] | None = None,
) -> list[Finding]:
    """All findings of `rules` on `module`, in one batched traversal, noqa applied.

    `enabled`: the codes the run selected (default: those of `rules`), for AGF100's
    judgement of `# noqa` codes, which runs after every other rule.

    `text` is `module`'s source when the caller has it: regenerating it is a codegen pass.
    `target_torch` is the project's PyTorch floor (None: assume the newest); `roles` its
    role vocabulary.
    """
    if not rules:
        return []
    context = RuleContext(path, module, target_torch, roles, text, project)
    instances = [rule(context) for rule in rules]
    context.semantic.syntax.walk_batched(instances)  # the index is built once and shared
    findings = [finding for rule in instances for finding in rule.findings]
    for judge in (rule for rule in instances if hasattr(rule, "judge")):  # AGF100: after every other rule
        judge.judge(findings, enabled if enabled is not None else [rule.code for rule in rules])
        findings += judge.findings
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
    project: ProjectIndex | None = None,
) -> list[Finding]:
    """The `active` rules' findings, then the fixes of `rules` at `sites` (one order for
    the check and for the plans, so plan ids agree)."""
    findings = run_rules(module, active, path, text, target_torch, roles, project, codes_of(rules))
    if sites:
        from autograd_fix.codemods.site_fixes import site_findings

        findings += site_findings(module, rules, path, text, sites, target_torch, roles)
    return findings


def _noqa_map(text: str) -> dict[int, frozenset[str] | None]:
    """line -> codes suppressed there (None = every code); `FILE_NOQA_LINE` -> the codes
    a file-level `# autograd-fix: noqa` suppresses everywhere."""
    result: dict[int, frozenset[str] | None] = {}
    if "noqa" not in text and "noqa" not in text.lower():  # the comments are case-insensitive
        return result
    for match in _FILE_NOQA.finditer(text):
        codes = match.group("codes")
        if codes is None or result.get(FILE_NOQA_LINE, frozenset()) is None:
            result[FILE_NOQA_LINE] = None
        else:
            result[FILE_NOQA_LINE] = result.get(FILE_NOQA_LINE, frozenset()) | {c.strip().upper() for c in codes.split(",")}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _NOQA.search(line)
        if match:
            codes = match.group("codes")
            result[number] = None if codes is None else frozenset(c.strip().upper() for c in codes.split(","))
    return result


def _is_suppressed(finding: Finding, suppressed: dict[int, frozenset[str] | None]) -> bool:
    for line in (FILE_NOQA_LINE, finding.span.line):
        if line in suppressed:
            codes = suppressed[line]
            if codes is None or finding.code in codes:
                return True
    return False


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


class TextMismatch(EngineError):
    """A top-level node's generated code is not the file's text where `StatementCode`
    placed it: the caller starts again with the code generated for every node."""


class StatementCode:
    """The source of a module's top-level nodes, generated only where needed.

    A pruned fix pass (`apply_fixes` with `paths`) returns a module whose untouched
    top-level statements are the original node objects, so the rewritten text can reuse
    their text and generate code only for what changed: codegen of the whole module for
    every patch made the cost of one patch grow with the size of its file.

    With the module's `text`, an original node's text is read off the file, between the
    offsets `positions.top_level_offsets` gives (its lines, placed by Python's own
    parser): no codegen at all for what a fix leaves alone. Only where the rewritten
    module parts from the original (a node replaced, removed, or something inserted
    next to it) do the offsets decide the result, so there each original node next to
    the change is generated and compared with the text between its offsets; a
    difference raises `TextMismatch`. Without `text`, or where the offsets cannot be
    found, every top-level node is generated once, as before.
    """

    def __init__(self, module: cst.Module, text: str | None = None) -> None:
        from autograd_fix.codemods.positions import top_level_offsets

        self.module = module  # keeps the nodes alive: their ids stay theirs
        self._nodes = (*module.header, *module.body, *module.footer)
        self._offsets = top_level_offsets(module, text) if text is not None else None
        self._texts: dict[int, str] = {}
        if self._offsets is None or text is None:
            self._texts = {id(node): module.code_for_node(node) for node in self._nodes}
            self._text = ""
            #: the module's own text (as `module.code`, without a second codegen)
            self.original = self.code(module)
        else:
            self._text = text
            self._index = {id(node): index for index, node in enumerate(self._nodes)}
            self._checked: set[int] = set()
            self.original = text

    def text_of(self, node: cst.CSTNode) -> str:
        """The code of one top-level node (generated unless it is one of the original's)."""
        if self._offsets is not None:
            index = self._index.get(id(node))
            if index is not None:
                self._check(index)
                return self._slice(index)
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
        if self._offsets is None:
            return self.join((self.text_of(node) for node in nodes), rewritten.has_trailing_newline)
        indices = [self._index.get(id(node)) for node in nodes]
        kept = set(indices)
        for index in range(len(self._nodes)):
            if index not in kept:  # removed or replaced: where it was is where the change goes
                self._check(index)
        ends = [-1, *indices, len(self._nodes)]
        for before, after in zip(ends, ends[1:]):
            if before is None or after is None or after != before + 1:  # a seam: the nodes beside it are checked
                for index in (before, after):
                    if index is not None and 0 <= index < len(self._nodes):
                        self._check(index)
        pieces = (self._slice(index) if index is not None else self.module.code_for_node(node) for index, node in zip(indices, nodes))
        return self.join(pieces, rewritten.has_trailing_newline)

    def _slice(self, index: int) -> str:
        assert self._offsets is not None
        return self._text[self._offsets[index] : self._offsets[index + 1]]

    def _check(self, index: int) -> None:
        """Raise `TextMismatch` unless original node `index` generates the text between its offsets."""
        if index in self._checked:
            return
        if self.module.code_for_node(self._nodes[index]) != self._slice(index):
            raise TextMismatch(f"top-level node {index} is not where its lines were placed")
        self._checked.add(index)


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
    return codes.code(rewritten) if codes is not None and codes.module is module else rewritten.code


#: young-generation allocations between cyclic collections while a file is checked
#: (CPython's default is 700). A parse allocates hundreds of thousands of nodes that live
#: as long as the file's analysis, so at 700 the collector runs thousands of times per run
#: and keeps promoting, then re-scanning, live trees: about a tenth of the CPU time of a
#: `--no-verify` run over timm (2,096 young, 190 middle and 17 full collections for half
#: its files; 154, 13 and 1 at 10,000). What is garbage is still collected, a little later.
GC_YOUNG_THRESHOLD = 10_000


@contextlib.contextmanager
def fewer_collections(threshold: int = GC_YOUNG_THRESHOLD) -> Iterator[None]:
    """Raise the collector's young-generation threshold to `threshold` for the block
    (never lower it), and put the old thresholds back after."""
    old = gc.get_threshold()
    if old[0] >= threshold:
        yield
        return
    gc.set_threshold(threshold, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def check_source(
    text: str,
    rules: Sequence[type[Rule]],
    *,
    path: str = "<stdin>",
    options: FixOptions = FixOptions(),
    compute_fix: bool = True,
    sites: Sequence[tuple[str, int]] = (),
    validate: Callable[[str], None] | None = None,
    admitted: Sequence[str] | None = None,
) -> SourceResult:
    """Lint `text`; with `compute_fix`, also produce the fixed text (or why not).

    Every finding's fix comes back as data (`TextFix`, made once right after the rule
    pass). `sites` (rule code, line) are bugs a run showed (`doctor`): each adds the
    rule's fix built at that site (`site_fixes`), after the static findings. `validate`
    checks each round's text (default: compiled as one file). `admitted`: the codes of
    `rules` whose prefilter admits `text` (`prefilters.triggered_codes`), where the caller
    already asked (the command line does, to decide whether to load libcst at all); the
    prefilters are not run twice on one text."""
    with fewer_collections():
        return _check_source(text, rules, path, options, compute_fix, sites, validate, admitted)


def _check_source(
    text: str,
    rules: Sequence[type[Rule]],
    path: str,
    options: FixOptions,
    compute_fix: bool,
    sites: Sequence[tuple[str, int]],
    validate: Callable[[str], None] | None,
    admitted: Sequence[str] | None = None,
) -> SourceResult:
    active = triggered(rules, text) if admitted is None else _admitted_rules(rules, admitted)
    if not active and not sites:
        # not parsed with libcst; a torch file that does not parse is still an error
        problem = syntax_problem(text) if uses_torch(text) else None
        if problem is not None:
            raise EngineError(problem)
        return SourceResult()
    module = parse_module(text)
    findings = materialized(
        module, with_sites(module, rules, active, path, text, options.target_torch, options.roles, sites, options.project), text
    )
    result = SourceResult(findings=findings, module=module)
    if compute_fix and any(options.allows_finding(f) for f in findings):
        # later rounds run all selected rules, not only those the original text triggered:
        # a fix can write what another rule's prefilter looks for (`.detach()` for AGF001)
        from autograd_fix.codemods.fix_rounds import fix_rounds

        rounds = fix_rounds(text, findings, lambda new: analyse_text(new, rules, path, options), options.allows_finding, validate)
        from autograd_fix.codemods.unused_imports import drop_newly_unused_imports

        result.fixed = None if rounds.error else drop_newly_unused_imports(text, rounds.text, path)
        result.follow_ons, result.notes, result.fix_error = rounds.follow_ons, rounds.notes, rounds.error
        result.applied = rounds.applied
    return result


def analyse_text(text: str, rules: Sequence[type[Rule]], path: str, options: FixOptions) -> list[Finding]:
    """A later round's findings on a rewritten `text`, fixes as data. The text is parsed
    even when no rule's trigger occurs in it: that parse is what shows the rewritten
    text is one libcst can read (fixes always parse). Raises EngineError when it is not."""
    module = parse_module(text)
    active = triggered(rules, text)
    findings = run_rules(module, active, path, text, options.target_torch, options.roles, options.project, codes_of(rules))
    return materialized(module, findings, text) if active else []


def materialized(module: cst.Module, findings: list[Finding], text: str | None = None) -> list[Finding]:
    """`findings` with each rule's `Fix` (node edits) turned into a `TextFix` once.

    A fix whose replacement cannot be built is dropped (the finding stays, without it):
    the same as before, when such a fix made the whole file's fixes fail later."""
    fixes = [fix for f in findings for fix in (f.fix, *f.alternatives) if isinstance(fix, Fix)]
    if not fixes:
        return findings
    paths = target_paths(module, fixes)
    try:  # the untouched statements' text read off the file
        return _materialized(module, findings, text, paths, StatementCode(module, text))
    except TextMismatch:  # generated: what the file's text is not known to be
        return _materialized(module, findings, text, paths, StatementCode(module))


def _materialized(
    module: cst.Module, findings: list[Finding], text: str | None, paths: dict[int, frozenset[int]], codes: StatementCode
) -> list[Finding]:
    from autograd_fix.codemods.text_fixes import common_prefix, materialize

    # libcst's text of the module equals the file's, except where libcst does not round-trip
    # (a file with old-Mac `\r` line ends loses its last one): edits up to where the two
    # texts part are the file's edits; a fix that reaches past that point is dropped
    same = len(codes.original) if text is None or text == codes.original else common_prefix(text, codes.original)

    def one(fix: AnyFix | None) -> TextFix | None:
        if not isinstance(fix, Fix):
            return fix
        try:
            made = materialize(module, fix, paths, codes)
        except TextMismatch:
            raise
        except Exception:  # a rule's replacement built an invalid tree
            return None
        return made if all(edit.end < same or edit.end == same == len(codes.original) for edit in made.edits) else None

    result = []
    for finding in findings:
        alternatives = tuple(a for a in map(one, finding.alternatives) if a is not None)
        result.append(dataclasses.replace(finding, fix=one(finding.fix), alternatives=alternatives))
    return result


def validate_python(text: str) -> None:
    try:
        compile_quietly(text)
    except (SyntaxError, ValueError) as error:
        raise EngineError(f"a fix produced code that does not compile ({error}); file left unchanged") from None


def single_fix_diff(text: str, fix: TextFix | None, path: str, bom: bool = False) -> str:
    """Unified diff of `fix` applied alone to `text` (the JSON output's per-finding diff);
    `bom` as for `unified_diff`."""
    from autograd_fix.codemods.text_fixes import apply_fix

    if fix is None:
        return ""
    return unified_diff(text, apply_fix(text, fix), path, bom=bom)


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
