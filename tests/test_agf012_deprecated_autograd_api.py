"""AGF012 deprecated-autograd-api: aliases, positional autocast arguments, a real run of the example script."""

from __future__ import annotations

import textwrap


from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

AGF012 = rule_by_code("AGF012")


def test_amp_alias_and_two_findings_in_one_file() -> None:
    source = textwrap.dedent(
        """
        from torch.cuda.amp import autocast as ac, GradScaler as GS
        import torch.cuda.amp

        s = GS()
        with ac(False):
            pass
        with torch.cuda.amp.autocast(True, torch.float16, False):
            pass
        """
    ).lstrip()
    result = check_source(source, [AGF012])
    assert len(result.findings) == 3
    assert 's = torch.amp.GradScaler("cuda")' in result.fixed
    assert 'with torch.amp.autocast("cuda", enabled=False):' in result.fixed
    assert 'torch.amp.autocast("cuda", enabled=True, dtype=torch.float16, cache_enabled=False)' in result.fixed
