"""The device registry: registries, devices, props, device selection."""
from __future__ import annotations

import pytest

import metal_backend as mb


def test_cpu_registry_always_present():
    names = [r.name for r in mb.registries()]
    assert "CPU" in names
    cpu = next(r for r in mb.registries() if r.name == "CPU")
    assert cpu.device_count == 1
    assert [d.name for d in cpu.devices] == ["CPU"]
    assert cpu.device(0).name == "CPU"
    assert isinstance(cpu.features, dict)


def test_devices_lists_every_registry_device():
    assert [d.name for d in mb.devices()] == [d.name for r in mb.registries() for d in r.devices]


def test_default_device_is_a_real_device():
    dev = mb.device()
    expected = "Metal" if any(d.name == "Metal" for d in mb.devices()) else "CPU"
    assert dev.name == expected
    assert mb.device(None).name == expected


def test_device_by_name():
    assert mb.device("CPU").name == "CPU"
    assert mb.device("CPU").type == mb.DeviceType.CPU


def test_unknown_device_name_lists_known_names():
    with pytest.raises(ValueError) as info:
        mb.device("TPU")
    assert isinstance(info.value, mb.InvalidArgumentError)
    assert "'TPU'" in str(info.value) and "'CPU'" in str(info.value)


def test_device_name_must_be_str():
    with pytest.raises(TypeError):
        mb.device(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("index", [1, 5, -1])
def test_registry_device_index_out_of_range(index):
    reg = mb.registries()[0]
    with pytest.raises(IndexError) as info:
        reg.device(index)
    assert str(index) in str(info.value)


def test_props(device):
    props = device.props
    assert props.name == device.name
    assert props.description == device.description and props.description
    assert props.type == device.type
    free, total = device.memory
    assert 0 < total and 0 <= free <= total
    assert 0 < props.memory_total and props.memory_free <= props.memory_total
    caps = props.caps
    for field in ("async_", "host_buffer", "buffer_from_host_ptr", "events"):
        assert isinstance(getattr(caps, field), bool)
    assert isinstance(props.extra, dict)


def test_cpu_props_match_the_host():
    import os

    dev = mb.device("CPU")
    assert dev.props.caps.buffer_from_host_ptr
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert dev.memory[1] == total


def test_buffer_types(device):
    bufts = device.buffer_types
    assert bufts and device.buffer_type.name == bufts[0].name
    for buft in bufts:
        assert buft.device.name == device.name
        assert device.supports_buft(buft)
        assert buft.alignment >= 1 and buft.alignment & (buft.alignment - 1) == 0
        assert buft.max_size > 0


def test_cpu_buffer_type_alignment_at_least_64():
    buft = mb.device("CPU").buffer_type
    assert buft.name == "CPU" and buft.is_host and buft.alignment >= 64


def test_supports_buft_is_per_device():
    cpu = mb.device("CPU")
    for dev in mb.devices():
        if dev.name != "CPU":
            assert not cpu.supports_buft(dev.buffer_type)
            assert not dev.supports_buft(cpu.buffer_type)


def test_backend_init_and_options(device):
    backend = device.init_backend()
    assert backend.device.name == device.name
    assert backend.name
    backend.synchronize()


def test_cpu_backend_threads():
    backend = mb.device("CPU").init_backend("n_threads=3")
    assert backend.options["n_threads"] == 3
    backend.options["n_threads"] = 1
    assert backend.options.to_dict()["n_threads"] == 1
    backend.options = {"n_threads": 2}
    assert backend.options["n_threads"] == 2
    assert "n_threads" in backend.options and len(backend.options) >= 1


@pytest.mark.parametrize("params", ["n_threads=0", "n_threads=x", "bogus=1", "n_threads"])
def test_backend_bad_params(params):
    with pytest.raises(mb.InvalidArgumentError) as info:
        mb.device("CPU").init_backend(params)
    assert params.split("=")[0] in str(info.value)


def test_backend_bad_option():
    backend = mb.device("CPU").init_backend()
    with pytest.raises(mb.InvalidArgumentError):
        backend.options["n_threads"] = -2
    with pytest.raises(KeyError):
        backend.options["nope"]
    with pytest.raises(mb.InvalidArgumentError) as info:
        backend.options["nope"] = 1
    assert "n_threads" in str(info.value)  # the message lists the known options
    with pytest.raises(TypeError):
        backend.options["n_threads"] = "4"


def test_error_classes_derive_from_builtins():
    assert issubclass(mb.OutOfMemoryError, mb.MetalBackendError) and issubclass(mb.OutOfMemoryError, MemoryError)
    assert issubclass(mb.InvalidArgumentError, ValueError)
    assert issubclass(mb.OutOfRangeError, mb.InvalidArgumentError) and issubclass(mb.OutOfRangeError, IndexError)
    assert issubclass(mb.UnsupportedOpError, NotImplementedError)
    assert issubclass(mb.DeviceError, mb.MetalBackendError)
    assert issubclass(mb.MetalBackendError, RuntimeError)
