"""`python -m metal_backend`: print every registry and device, then self-check each device."""
from __future__ import annotations

import sys

import metal_backend as mb
from metal_backend import selfcheck


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def _print_shader_families(dev: mb.Device) -> None:
    """Which shader families compiled, and the compiler's message for each that did not: a family
    that failed makes only its ops unsupported, and a Scheduler runs those on the CPU."""
    if not dev.shader_families:
        return
    families = dev.compile_shader_families()  # also those no self-check op needed
    ok = [name for name, state in families.items() if state.startswith("compiled")]
    print(f"    shader families: {len(ok)} of {len(families)} compiled ({', '.join(ok) or 'none'})")
    for name, state in families.items():
        if not state.startswith("compiled"):
            print(f"    shader family {name} {state}"
                  + ("; its ops run on the CPU" if state.startswith("failed") else ""))


def main() -> int:
    print(f"metal_backend {mb.__version__}")
    failures = 0
    for reg in mb.registries():
        features = ", ".join(f"{k}={v}" for k, v in reg.features.items()) or "none"
        print(f"\nregistry {reg.name}: {reg.device_count} device(s); features: {features}")
        for dev in reg.devices:
            props = dev.props
            caps = props.caps
            print(f"  device {props.name}: {props.description} ({props.type.name})")
            print(f"    memory: {_mib(props.memory_free)} free of {_mib(props.memory_total)}")
            print(f"    caps: async={caps.async_} host_buffer={caps.host_buffer} "
                  f"buffer_from_host_ptr={caps.buffer_from_host_ptr} events={caps.events}")
            for key, value in sorted(props.extra.items()):
                if not key.startswith("shader_family."):  # listed after the self-check, below
                    print(f"    {key}: {value}")
            for buft in dev.buffer_types:
                default = " (default)" if buft.name == dev.buffer_type.name else ""
                print(f"    buffer type {buft.name}{default}: alignment {buft.alignment}, "
                      f"max_size {buft.max_size}, is_host {buft.is_host}")
            backend = dev.init_backend()
            print(f"    backend {backend.name}: options {backend.options.to_dict()}")
            try:
                for line in selfcheck.run(dev):
                    print(f"    self-check ok: {line}")
            except mb.MetalBackendError as exc:
                failures += 1
                print(f"    self-check FAILED: {exc}")
            _print_shader_families(dev)
    print("\nall self-checks passed" if failures == 0 else f"\n{failures} device(s) failed their self-check")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
