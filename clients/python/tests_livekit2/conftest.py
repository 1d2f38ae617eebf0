"""The LiveKit Agents 2.0 tests share the main suite's server fixtures (tests/conftest.py): a
real `switchboard serve` on loopback with the test tenant's tools and agents."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("switchboard_suite", Path(__file__).parents[1] / "tests" / "conftest.py")
assert _spec is not None and _spec.loader is not None
suite = importlib.util.module_from_spec(_spec)
sys.modules["switchboard_suite"] = suite
_spec.loader.exec_module(suite)

upstream = suite.upstream
server = suite.server
sb = suite.sb
new_id = suite.new_id
