"""The source registry: lazy "module:Class" entries, one per known source name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from skillopt_sleep.config import KNOWN_SOURCES
from skillopt_sleep.errors import UnknownNameError
from skillopt_sleep.sources import REGISTRY, Source, get_source


def test_registry_names_are_the_known_sources():
    assert set(REGISTRY) == set(KNOWN_SOURCES)


@pytest.mark.parametrize("name", KNOWN_SOURCES)
def test_get_source_builds_the_registered_class(name):
    src = get_source(name)
    assert isinstance(src, Source)
    assert src.name == name


def test_unknown_source_name():
    with pytest.raises(UnknownNameError) as err:
        get_source("emacs")
    assert err.value.kind == "source" and "claude_code" in str(err.value)


def test_importing_the_package_imports_no_harvester():
    code = (
        "import sys, skillopt_sleep.sources as s; "
        "print(sorted(m for m in sys.modules if m.startswith('skillopt_sleep.sources.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['skillopt_sleep.sources.base']"


def test_no_source_module_imports_a_sibling_source_module():
    """Shared helpers live in sources.common (and sources.copilot_events for the Copilot
    event envelope), so every harvester can be read, changed and loaded alone."""
    import ast
    import importlib.util

    modules = {target.split(":")[0] for target in REGISTRY.values()}
    for module in sorted(modules):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        tree = ast.parse(Path(spec.origin).read_text("utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not (imported & (modules - {module})), module
