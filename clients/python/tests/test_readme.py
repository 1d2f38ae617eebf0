"""The README's minimal agents stay true: each compiles, is under 30 lines, and every name it
imports exists in the pinned framework versions."""

from __future__ import annotations

import ast
import importlib
import re

from conftest import REPO


def _snippets() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Python: LiveKit Agents, Pipecat, OpenAI Agents SDK", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_each_framework_has_a_complete_minimal_agent() -> None:
    snippets = _snippets()
    assert len(snippets) == 3
    for code in snippets:
        assert len(code.strip().splitlines()) < 30
        tree = ast.parse(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)
