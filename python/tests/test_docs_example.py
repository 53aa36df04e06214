# SPDX-License-Identifier: MIT
"""The complete example of docs/python.md runs as it is written there."""
import os
import re

import pytest

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


def example_blocks():
    with open(DOC) as f:
        text = f.read()
    return [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "torch.from_dlpack" in b]


def test_the_torch_example_runs():
    pytest.importorskip("torch")
    blocks = example_blocks()
    assert blocks, "docs/python.md has no example that hands a result back to torch"
    exec(compile(blocks[0], "docs/python.md", "exec"), {})
