"""mb.gguf against gguf-py: files written by gguf-py's GGUFWriter (metadata of every value type, arrays,
tensors of every type this library reads) open and load equal to gguf-py's GGUFReader; bad files
raise GGUFError before any tensor data is read; a bounded mutation fuzz of headers finds no other
outcome (no crash, no other exception)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import metal_backend as mb
from op_cases import grid_blocks

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as GT  # noqa: E402

QUANT = {
    "q4_0": GT.Q4_0, "q4_1": GT.Q4_1, "q5_0": GT.Q5_0, "q5_1": GT.Q5_1, "q8_0": GT.Q8_0,
    "q2_K": GT.Q2_K, "q3_K": GT.Q3_K, "q4_K": GT.Q4_K, "q5_K": GT.Q5_K, "q6_K": GT.Q6_K,
    "iq4_nl": GT.IQ4_NL, "iq4_xs": GT.IQ4_XS, "mxfp4": GT.MXFP4,
}
# The grid types, stored as random blocks (nothing quantizes to them here).
GRID = {
    "iq2_xxs": GT.IQ2_XXS, "iq2_xs": GT.IQ2_XS, "iq2_s": GT.IQ2_S, "iq3_xxs": GT.IQ3_XXS, "iq3_s": GT.IQ3_S,
    "iq1_s": GT.IQ1_S, "iq1_m": GT.IQ1_M,
}

METADATA = [
    ("t.u8", "add_uint8", 200), ("t.i8", "add_int8", -100), ("t.u16", "add_uint16", 60000),
    ("t.i16", "add_int16", -30000), ("t.u32", "add_uint32", 4_000_000_000), ("t.i32", "add_int32", -2_000_000_000),
    ("t.f32", "add_float32", 1.5), ("t.u64", "add_uint64", 2**63 + 5), ("t.i64", "add_int64", -(2**62)),
    ("t.f64", "add_float64", 3.141592653589793), ("t.bool", "add_bool", True), ("t.str", "add_string", "héllo"),
]


def write_file(path, alignment=None, tensors=None):
    w = gguf.GGUFWriter(str(path), "test")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, fn, value in METADATA:
        getattr(w, fn)(key, value)
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, 1.25])
    w.add_array("t.arr_str", ["a", "bc", ""])
    rng = np.random.default_rng(1)
    if tensors is None:
        tensors = {"w.f32": rng.standard_normal((3, 64)).astype(np.float32),
                   "w.f16": rng.standard_normal((2, 5, 32)).astype(np.float16),
                   "w.i32": np.arange(7, dtype=np.int32)}
        for name, t in QUANT.items():
            block = getattr(mb, name).block_size
            x = rng.standard_normal((4, 2 * max(block, 128))).astype(np.float32)
            tensors[f"w.{name}"] = (np.frombuffer(mb.quantize(x, getattr(mb, name)), np.uint8).reshape(4, -1), t)
        for name, t in GRID.items():
            tensors[f"w.{name}"] = (grid_blocks(getattr(mb, name), (4, 512), rng).reshape(4, -1), t)
    for name, v in tensors.items():
        if isinstance(v, tuple):
            w.add_tensor(name, v[0], raw_dtype=v[1])
        else:
            w.add_tensor(name, v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return write_file(tmp_path_factory.mktemp("gguf") / "sample.gguf")


def reader_value(field):
    return field.contents()


def test_metadata_equals_gguf_py(sample):
    f = mb.gguf.open(sample)
    r = gguf.GGUFReader(str(sample))
    fields = {k: v for k, v in r.fields.items() if not k.startswith("GGUF.")}  # gguf-py's header pseudo-fields
    assert set(f.metadata) == set(fields)
    assert (r.fields["GGUF.version"].contents(), r.fields["GGUF.tensor_count"].contents(),
            r.fields["GGUF.kv_count"].contents()) == (f.version, len(f.tensors), len(f.metadata))
    for key, field in fields.items():
        want = reader_value(field)
        got = f.metadata[key]
        if isinstance(want, float):
            assert got == pytest.approx(want, rel=1e-7)
        else:
            assert got == want, key
    assert f.metadata["t.arr_str"] == ["a", "bc", ""]
    assert f.metadata["t.u64"] == 2**63 + 5 and f.metadata["t.bool"] is True
    assert f.version == 3 and f.alignment == 32


def test_tensors_load_equal_to_gguf_py(sample):
    f = mb.gguf.open(sample)
    r = gguf.GGUFReader(str(sample))
    assert [t.name for t in f.tensors] == [t.name for t in r.tensors]
    loaded = f.load()
    for rt in r.tensors:
        info = f.tensor_info(rt.name)
        assert info.shape == tuple(int(d) for d in reversed(rt.shape.tolist()))
        assert info.nbytes == int(rt.n_bytes)
        assert info.type.id == int(rt.tensor_type)
        assert f.data_offset + info.offset == int(rt.data_offset)
        t = loaded[rt.name]
        assert t.type == info.type and t.shape == info.shape
        assert t.get_bytes() == bytes(np.asarray(rt.data).tobytes())
        if rt.tensor_type in QUANT.values() or rt.tensor_type in GRID.values():
            want = gguf.quants.dequantize(np.asarray(rt.data), rt.tensor_type)
            np.testing.assert_array_equal(t.get(), want.reshape(info.shape))


def test_load_is_zero_copy_on_the_cpu(sample):
    f = mb.gguf.open(sample)
    loaded = f.load(mb.device("CPU"))
    t = loaded["w.f32"]
    assert t.buffer.buffer_type.name == "CPU_Mapped" and t.buffer.size == t.nbytes
    # Writing a tensor changes the mapping (copy-on-write), never the file.
    before = sample.read_bytes()
    t.set(np.zeros(t.shape, np.float32))
    np.testing.assert_array_equal(t.get(), 0)
    assert sample.read_bytes() == before


def test_load_copies_into_a_buffer_type(sample):
    f = mb.gguf.open(sample)
    buft = mb.device("CPU").buffer_type
    loaded = f.load(buft)
    r = gguf.GGUFReader(str(sample))
    for rt in r.tensors:
        assert loaded[rt.name].get_bytes() == bytes(np.asarray(rt.data).tobytes())


def test_custom_alignment(tmp_path):
    p = write_file(tmp_path / "a.gguf", alignment=64,
                   tensors={"x": np.ones((3, 5), np.float32), "y": np.arange(9, dtype=np.float32)})
    f = mb.gguf.open(p)
    assert f.alignment == 64 and f.data_offset % 64 == 0
    assert all(t.offset % 64 == 0 for t in f.tensors)
    np.testing.assert_array_equal(f.load()["y"].get(), np.arange(9, dtype=np.float32))


# ---------------------------------------------------------------------------------------------- bad files


def _header(version=3, n_tensors=0, n_kv=0):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def _s(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


BAD = {
    "empty": (b"", "empty"),
    "wrong_magic": (b"GGML" + bytes(20), "wrong magic"),
    "version_1": (_header(version=1), "unsupported version 1"),
    "big_endian": (b"GGUF" + struct.pack(">I", 3) + bytes(16), "big-endian"),
    "truncated_header": (_header()[:10], "truncated"),
    "huge_kv_count": (_header(n_kv=2**62), "metadata count"),
    "huge_tensor_count": (_header(n_tensors=2**60), "tensor count"),
    "key_past_end": (_header(n_kv=1) + struct.pack("<Q", 2**40) + bytes(16), "past the end"),
    "bad_value_type": (_header(n_kv=1) + _s(b"k") + struct.pack("<I", 99), "unknown value type 99"),
    "huge_array": (_header(n_kv=1) + _s(b"k") + struct.pack("<IIQ", 9, 4, 2**50), "cannot fit"),
    "duplicate_key": (_header(n_kv=2) + (_s(b"k") + struct.pack("<IB", 0, 1)) * 2, "duplicate metadata key"),
    "bad_utf8": (_header(n_kv=1) + _s(b"\xff\xfe") + struct.pack("<IB", 0, 1), "UTF-8"),
    "bad_bool": (_header(n_kv=1) + _s(b"k") + struct.pack("<IB", 7, 2), "bool"),
    "alignment_not_pow2": (_header(n_kv=1) + _s(b"general.alignment") + struct.pack("<II", 4, 48), "power of two"),
    "too_many_dims": (_header(n_tensors=1) + _s(b"t") + struct.pack("<I", 5) + bytes(64), "dimensions"),
    "unknown_tensor_type": (_header(n_tensors=1) + _s(b"t") + struct.pack("<IQIQ", 1, 4, 200, 0),
                            "unknown type id 200"),
    "unsupported_ggml_type": (_header(n_tensors=1) + _s(b"t") + struct.pack("<IQIQ", 1, 256, 34, 0), "tq1_0"),
    "partial_block": (_header(n_tensors=1) + _s(b"t") + struct.pack("<IQIQ", 1, 33, 2, 0), "block size 32"),
    "misaligned_offset": (_header(n_tensors=1) + _s(b"t") + struct.pack("<IQIQ", 1, 4, 0, 4), "alignment"),
    "data_past_end": (_header(n_tensors=1) + _s(b"t") + struct.pack("<IQIQ", 1, 1024, 0, 0), "past the end"),
    "duplicate_tensor": (_header(n_tensors=2) + (_s(b"t") + struct.pack("<IQIQ", 1, 4, 0, 0)) * 2 + bytes(64),
                         "duplicate tensor name"),
    "overlap": (_header(n_tensors=2) + _s(b"a") + struct.pack("<IQIQ", 1, 16, 0, 0) + _s(b"b") +
                struct.pack("<IQIQ", 1, 16, 0, 32) + bytes(200), "overlap"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_file_raises(tmp_path, name):
    data, match = BAD[name]
    p = tmp_path / f"{name}.gguf"
    p.write_bytes(data)
    with pytest.raises(mb.gguf.GGUFError, match=match):
        mb.gguf.open(p)


def test_gguf_error_is_typed():
    assert issubclass(mb.gguf.GGUFError, mb.InvalidArgumentError)
    assert issubclass(mb.gguf.GGUFError, ValueError)


def test_truncated_anywhere_raises(tmp_path, sample):
    data = sample.read_bytes()
    f = mb.gguf.open(sample)
    end = f.data_offset + max(t.offset + t.nbytes for t in f.tensors)
    p = tmp_path / "cut.gguf"
    for cut in list(range(0, f.data_offset, 7)) + [f.data_offset, end - 1]:
        p.write_bytes(data[:cut])
        with pytest.raises(mb.gguf.GGUFError):
            mb.gguf.open(p)


FUZZ_CASES = 3000


def test_header_mutation_fuzz(tmp_path):
    """FUZZ_CASES mutations of a small file's header (byte flips, overwritten counts and lengths with
    boundary values, truncations, inserted bytes): each opens (and then loads) or raises GGUFError."""
    base = bytearray(write_file(tmp_path / "base.gguf", tensors={
        "x": np.ones((2, 32), np.float32),
        "q": (np.frombuffer(mb.quantize(np.ones((1, 256), np.float32), mb.q4_K), np.uint8).reshape(1, -1), GT.Q4_K),
    }).read_bytes())
    header_end = mb.gguf.open(tmp_path / "base.gguf").data_offset
    rng = np.random.default_rng(2026)
    specials = [0, 1, 2, 3, 4, 0x7F, 0x80, 0xFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**63 - 1, 2**63, 2**64 - 1]
    p = tmp_path / "fuzz.gguf"
    outcomes = {"ok": 0, "error": 0}
    for i in range(FUZZ_CASES):
        data = bytearray(base)
        for _ in range(int(rng.integers(1, 4))):
            kind = int(rng.integers(0, 5))
            pos = int(rng.integers(0, header_end))
            if pos >= len(data):  # an earlier truncation
                kind, pos = 4, len(data)
            if kind == 0:
                data[pos] ^= 1 << int(rng.integers(0, 8))
            elif kind == 1:
                data[pos] = int(rng.integers(0, 256))
            elif kind == 2:
                v = specials[int(rng.integers(0, len(specials)))]
                width = 8 if rng.random() < 0.5 else 4
                data[pos:pos + width] = (v % 2 ** (8 * width)).to_bytes(width, "little")
            elif kind == 3:
                del data[int(rng.integers(0, len(data))):]
            else:
                data[pos:pos] = bytes(rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8))
        p.write_bytes(bytes(data))
        try:
            f = mb.gguf.open(p)
        except mb.gguf.GGUFError:
            outcomes["error"] += 1
            continue
        for t in f.load().values():
            t.get_bytes()
        outcomes["ok"] += 1
    assert outcomes["ok"] + outcomes["error"] == FUZZ_CASES
    assert outcomes["error"] > FUZZ_CASES // 4 and outcomes["ok"] > 0
