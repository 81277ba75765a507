"""The backend registry: lazy "module:Class" entries, one per known backend name."""

from __future__ import annotations

import subprocess
import sys

import pytest

from skillopt_sleep.backends import REGISTRY, Backend, get_backend
from skillopt_sleep.config import KNOWN_BACKENDS, BackendConfig
from skillopt_sleep.errors import UnknownNameError


def test_registry_names_are_the_known_backends():
    assert set(REGISTRY) == set(KNOWN_BACKENDS)


@pytest.mark.parametrize("name", KNOWN_BACKENDS)
def test_get_backend_builds_the_registered_class(name):
    backend = get_backend(BackendConfig(name=name, model="m"))
    assert isinstance(backend, Backend)
    assert backend.name == name


def test_unknown_backend_name():
    config = BackendConfig.model_construct(name="nope")  # the config itself rejects it
    with pytest.raises(UnknownNameError) as err:
        get_backend(config)
    assert err.value.kind == "backend" and "anthropic" in str(err.value)


def test_importing_the_package_imports_no_backend():
    code = (
        "import sys, skillopt_sleep.backends as b; "
        "print(sorted(m for m in sys.modules if m.startswith('skillopt_sleep.backends.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['skillopt_sleep.backends.base']"
