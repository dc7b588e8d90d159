"""Lifetimes and leaks: Python references dropped in every order, RSS flat over many cycles."""
from __future__ import annotations

import gc
import itertools
import sys
import weakref

import numpy as np
import pytest

import metal_backend as mb


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE")


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RSS from /proc")

NAMES = ("device", "buft", "buf", "view")


@pytest.mark.parametrize("order", list(itertools.permutations(NAMES)), ids="-".join)
def test_drop_references_in_any_order(order):
    objs = {}
    objs["device"] = mb.device("CPU")
    objs["buft"] = objs["device"].buffer_type
    objs["buf"] = objs["buft"].alloc(256)
    objs["view"] = objs["buf"].numpy()
    objs["view"][:] = 3
    for name in order:
        if name != "view" and "view" in objs:
            assert int(objs["view"].sum()) == 3 * 256  # still valid while anything else goes
        del objs[name]
        gc.collect()
    assert not objs


@pytest.mark.parametrize("order", list(itertools.permutations(("buf", "view", "source"))), ids="-".join)
def test_mapped_drop_in_any_order(order):
    source = np.full(64, 2.0, dtype=np.float32)
    ref = weakref.ref(source) if hasattr(source, "__weakref__") else None
    objs = {"source": source}
    del source
    objs["buf"] = mb.device("CPU").buffer_from_host_ptr(objs["source"])
    objs["view"] = objs["buf"].numpy()
    for name in order:
        remaining = [k for k in objs if k != name]
        del objs[name]
        gc.collect()
        if "view" in remaining:
            assert float(objs["view"].view(np.float32).sum()) == 128.0
        if "buf" in remaining:
            assert np.frombuffer(objs["buf"].get(0, 4), np.float32)[0] == 2.0
    if ref is not None:
        assert ref() is None  # the source goes once nothing wraps it


def test_mapped_buffer_keeps_source_alive():
    source = np.arange(16, dtype=np.float64)
    ref = weakref.ref(source)
    buf = mb.device("CPU").buffer_from_host_ptr(source)
    del source
    gc.collect()
    assert ref() is not None
    assert np.frombuffer(buf.get(), np.float64).tolist() == list(range(16))
    buf.free()
    gc.collect()
    assert ref() is None  # free() released the source


def test_mapped_buffer_sees_writes_to_source():
    source = np.zeros(8, dtype=np.int32)
    buf = mb.device("CPU").buffer_from_host_ptr(source)
    source[:] = np.arange(8)
    assert np.frombuffer(buf.get(), np.int32).tolist() == list(range(8))


def test_view_outlives_buffer_object():
    view = mb.device("CPU").buffer_type.alloc(1024).numpy()
    gc.collect()
    view[:] = 11
    assert int(view.sum()) == 11 * 1024


@linux_only
def test_alloc_free_cycles_do_not_leak():
    buft = mb.device("CPU").buffer_type
    for _ in range(200):  # warm up allocator caches
        buft.alloc(1 << 16).free()
    gc.collect()
    before = _rss_bytes()
    for i in range(10_000):
        buf = buft.alloc(1 << 16)
        if i % 3 == 0:
            buf.numpy()[0] = 1
        buf.free()
    gc.collect()
    grown = _rss_bytes() - before
    assert grown < 32 << 20, f"RSS grew by {grown} bytes over 10,000 alloc/free cycles of 64 KiB"


@linux_only
def test_mapped_wraps_do_not_leak():
    dev = mb.device("CPU")
    host = np.zeros(1 << 16, dtype=np.uint8)
    for _ in range(200):
        dev.buffer_from_host_ptr(host).free()
    gc.collect()
    before = _rss_bytes()
    refs_before = sys.getrefcount(host)
    for i in range(10_000):
        buf = dev.buffer_from_host_ptr(host)
        if i % 2:
            buf.free()
        del buf
    gc.collect()
    grown = _rss_bytes() - before
    assert grown < 32 << 20, f"RSS grew by {grown} bytes over 10,000 mapped wraps"
    assert sys.getrefcount(host) == refs_before  # every wrap released its reference
