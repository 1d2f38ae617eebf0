"""The README's minimal agents stay true: each compiles, is under 30 lines, every name it imports
exists in the pinned framework versions, and `mypy --strict` takes them as they are (so the
adapters' tools have the types the frameworks' parameters take)."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

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


def test_the_minimal_agents_pass_mypy_strict(tmp_path: Path) -> None:
    files = []
    for i, code in enumerate(_snippets()):
        path = tmp_path / f"readme_example_{i}.py"
        path.write_text(code)
        files.append(str(path))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"),
         *files],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
