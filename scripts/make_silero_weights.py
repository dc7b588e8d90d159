"""Makes metal_backend/vad/data/silero_vad_v6.2.bin, the Silero VAD v6.2 weights shipped in the package.

The weights are the 16 kHz branch of silero_vad.onnx in the silero-vad 6.2.3 wheel (MIT license,
Silero Team; the license text ships next to the weights as LICENSE-silero-vad). That ONNX file and
the wheel's silero_vad.jit are the v6.2 model; the wheel's silero_vad_16k.safetensors holds other
weights and is not used. The initializers are read with the onnx package (no torch); the file is
written in whisper.cpp's Silero layout with every tensor f32 (metal_backend/vad/silero_file.py).

    python scripts/make_silero_weights.py [--onnx PATH | --wheel PATH] [--out PATH]

With neither --onnx nor --wheel, `pip download --no-deps silero-vad==6.2.3` fetches the wheel into
a temporary directory. The ONNX file's SHA-256 is checked against the one this script was made for.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from metal_backend.vad.silero_file import SHAPES, read_silero_file, write_silero_file  # noqa: E402

VERSION = (6, 2, 3)
ONNX_MEMBER = "silero_vad/data/silero_vad.onnx"
LICENSE_MEMBER = "silero_vad-6.2.3.dist-info/licenses/LICENSE"
ONNX_SHA256 = "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"
DATA = ROOT / "metal_backend" / "vad" / "data"


def onnx_tensors(onnx_bytes: bytes) -> dict[str, np.ndarray]:
    """The 16 kHz branch's weights by whisper.cpp's names (`_model.` + the PyTorch name).

    silero_vad.onnx branches on the sample rate (an If node: sr == 16000 takes then_branch); each
    branch holds its weights as Constant nodes named ..._Inline_0__<pytorch name>."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(onnx_bytes)
    branches = [n for n in model.graph.node if n.op_type == "If"]
    if len(branches) != 1:
        raise SystemExit(f"expected one If node (the sample rate switch), found {len(branches)}")
    then = next(a.g for a in branches[0].attribute if a.name == "then_branch")
    found: dict[str, np.ndarray] = {}
    for node in then.node:
        if node.op_type != "Constant":
            continue
        key = "_model." + node.output[0].rsplit("__", 1)[-1]
        if key in SHAPES:
            found[key] = numpy_helper.to_array(node.attribute[0].t)
    missing = sorted(set(SHAPES) - set(found))
    if missing:
        raise SystemExit(f"silero_vad.onnx lacks {missing}")
    for key, shape in SHAPES.items():
        if found[key].shape != shape:
            raise SystemExit(f"{key} has shape {found[key].shape}, expected {shape}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--onnx", type=Path, help="silero_vad.onnx from the silero-vad 6.2.3 wheel")
    src.add_argument("--wheel", type=Path, help="the silero_vad-6.2.3-py3-none-any.whl file")
    parser.add_argument("--out", type=Path, default=DATA / "silero_vad_v6.2.bin")
    args = parser.parse_args()

    license_text = None
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel
        if args.onnx is None and wheel is None:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "silero-vad==6.2.3",
                            "-d", tmp], check=True)
            wheel = next(Path(tmp).glob("silero_vad-6.2.3-*.whl"))
        if wheel is not None:
            with zipfile.ZipFile(wheel) as z:
                onnx_bytes = z.read(ONNX_MEMBER)
                license_text = z.read(LICENSE_MEMBER).decode()
        else:
            onnx_bytes = args.onnx.read_bytes()
    digest = hashlib.sha256(onnx_bytes).hexdigest()
    if digest != ONNX_SHA256:
        raise SystemExit(f"silero_vad.onnx has SHA-256 {digest}; this script is for the 6.2.3 file {ONNX_SHA256}")
    tensors = onnx_tensors(onnx_bytes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_silero_file(args.out, tensors, VERSION)
    back = read_silero_file(args.out)
    assert all(np.array_equal(back.tensors[k], tensors[k]) for k in SHAPES)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) from silero_vad.onnx {digest[:16]}...")
    if license_text is not None:
        (args.out.parent / "LICENSE-silero-vad").write_text(license_text)
        print(f"wrote {args.out.parent / 'LICENSE-silero-vad'}")


if __name__ == "__main__":
    main()
