"""Graph construction: ggml's ops over Tensors of one Context.

Every function records a node and returns its result tensor; nothing is computed until a backend
computes a Graph. Shapes and axes are numpy order; semantics and argument order follow ggml.
Bad shapes or types raise InvalidArgumentError naming the op and the shapes, at build time.
"""
from __future__ import annotations

from ._core import ops as _native

_NAMES = [name for name in dir(_native) if not name.startswith("_")]
globals().update({name: getattr(_native, name) for name in _NAMES})
__all__ = list(_NAMES)
