"""Unit finding remembers per-statement answers, so a file's Nth patch costs what it changed."""

from __future__ import annotations

import ast

from autograd_fix.verification import find_units
from autograd_fix.verification import source_memo
from autograd_fix.verification.source_memo import SourceMemo, bound_names

HEADER = '''import torch
from torch import nn

SCALE = 2.0
'''


def evaluation(index: int, decorated: bool = False) -> str:
    decorator = "@torch.no_grad()\n" if decorated else ""
    return f'''

{decorator}def evaluate_{index}(model, loader):
    model.eval()
    return torch.cat([model(x) for x, _ in loader])
'''


def version(count: int, decorated: set[int] = frozenset()) -> str:
    return HEADER + "".join(evaluation(i, i in decorated) for i in range(count))


def names(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.parse(source).body:
        found |= bound_names(node)
    return found


def test_module_scope_names_only():
    source = '''
import torch.nn.functional as F
from torch import optim as o
if torch.cuda.is_available():
    def helper(x):
        local = x * 2
        def inner():
            pass
        return local
else:
    helper = None
class Trainer:
    step = 0
    def fit(self):
        global best
        best = 1
losses = [loss for loss in range(3)]
'''
    assert names(source) == {"F", "o", "helper", "Trainer", "best", "losses"}


def test_same_units_with_and_without_a_memo():
    before, after = version(6), version(6, {3})
    memo = SourceMemo()
    find_units(version(6), version(6, {1}), path="ev.py", memo=memo)  # warm the memo
    assert find_units(before, after, path="ev.py", memo=memo) == find_units(before, after, path="ev.py")


def test_later_patches_analyse_only_what_they_changed(monkeypatch):
    computed: list[int] = []
    real = source_memo.bound_names

    def counting(node):
        computed.append(node.lineno)
        return real(node)

    monkeypatch.setattr(source_memo, "bound_names", counting)
    memo = SourceMemo()
    count = 30
    going_in: set[int] = set()
    for index in range(count):
        computed.clear()
        units = find_units(version(count, going_in), version(count, going_in | {index}), path="ev.py", memo=memo)
        assert [unit.qualname for unit in units] == [f"evaluate_{index}"]
        going_in.add(index)
        if index:
            # the original was last patch's rewritten version; only the changed def is new
            assert len(computed) == 1, computed


def test_two_statements_on_one_line_are_told_apart():
    memo = SourceMemo()
    module = ast.parse("a = 1; b = 2\n")
    first, second = module.body
    segment = "a = 1; b = 2\n"
    assert memo.bound_names(segment, first) == {"a"}
    assert memo.bound_names(segment, second) == {"b"}
