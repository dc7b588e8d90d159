"""The main job, `python -m metal_backend`, prints the registry and self-checks every device."""
from __future__ import annotations

import subprocess
import sys

import metal_backend as mb


def test_main_job_prints_registry_and_passes_self_checks():
    out = subprocess.run([sys.executable, "-m", "metal_backend"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    for reg in mb.registries():
        assert f"registry {reg.name}:" in out.stdout
        for dev in reg.devices:
            assert f"device {dev.name}: {dev.description}" in out.stdout
            for buft in dev.buffer_types:
                assert f"buffer type {buft.name}" in out.stdout
    assert "self-check FAILED" not in out.stdout
    assert "all self-checks passed" in out.stdout
