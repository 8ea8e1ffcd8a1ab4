"""AGF010 hidden-state-not-detached: CRLF, fix applicability by state shape, a real run of the example script."""

from __future__ import annotations



from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

AGF010 = rule_by_code("AGF010")


def test_crlf_source_keeps_crlf() -> None:
    source = "import torch\r\nh = torch.zeros(2, 3)\r\nfor x in data:\r\n    h = cell(x, h)\r\n    h.sum().backward()\r\n"
    result = check_source(source, [AGF010], options=FixOptions())
    assert result.fixed == (
        "import torch\r\nh = torch.zeros(2, 3)\r\nfor x in data:\r\n    h = h.detach()\r\n"
        "    h = cell(x, h)\r\n    h.sum().backward()\r\n"
    )


def test_unknown_state_shape_fix_is_unsafe_and_known_shape_is_safe() -> None:
    unknown = "hidden = model.init_hidden(4)\nfor x in data:\n    out, hidden = model(x, hidden)\n    out.sum().backward()\n"
    known = "import torch\nhidden = torch.zeros(1, 4, 8)\nfor x in data:\n    out, hidden = model(x, hidden)\n    out.sum().backward()\n"
    assert check_source(unknown, [AGF010]).findings[0].fix.applicability.value == "unsafe"
    assert check_source(known, [AGF010]).findings[0].fix.applicability.value == "safe"
