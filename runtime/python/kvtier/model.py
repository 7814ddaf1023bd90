"""The model an engine describes to kvtier: its layers and identity.

A :class:`Layer` is one model layer's state as the engine holds it: a kind
(``kv``, ``ring``, ``recurrent``, ``object``), the shape of one token row
(``kv``, ``ring``) or of the whole state (``recurrent``, ``object``), and its
dtype. kvtier itself only sees bytes: ``bytes_per_token = prod(shape) *
itemsize`` (the service's ``model.layers`` option, e.g. ``kv:4096``); the
dtype and shape stay on the Python side to give the arrays ``acquire`` lends
their shape back and to check what ``publish`` is handed. A transformer layer
with K and V is two ``kv`` layers (K, then V), each token-major: row i holds
token i.

Values only; share them freely between threads.
"""

import math

__all__ = ["Layer", "Model", "dtype_info"]

_KINDS = ("kv", "ring", "recurrent", "object")


def dtype_info(dtype):
    """``(name, itemsize, format)`` of a dtype given as a name, a numpy dtype
    or a torch dtype: the canonical name ("float32", "bfloat16"), its size in
    bytes and the buffer-protocol format kvtier lends it with (bfloat16, which
    has no format of its own, is lent as raw ``h`` (int16) words)."""
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    aliases = {"half": "float16", "float": "float32", "double": "float64",
               "bf16": "bfloat16"}
    name = aliases.get(name, name)
    if name == "bfloat16":
        return ("bfloat16", 2, "h")
    import numpy as np
    try:
        d = np.dtype(name)
    except TypeError as e:
        raise ValueError(f"dtype {dtype!r}: not a dtype numpy or torch "
                         f"knows") from None
    if d.kind not in "biufc" or d.byteorder == ">" or d.itemsize == 0:
        raise ValueError(f"dtype {dtype!r}: kvtier layers hold numbers "
                         f"(bool, int, uint, float, complex) in native order")
    return (d.name, d.itemsize, d.char)


class Layer:
    """One model layer's state: ``kind``, ``shape``, ``dtype`` (and a ring's
    ``window``). Make them with :meth:`kv`, :meth:`ring`, :meth:`recurrent`
    or :meth:`object`."""

    __slots__ = ("kind", "shape", "dtype", "window", "itemsize", "format")

    def __init__(self, kind, shape, dtype="float32", window=0):
        if kind not in _KINDS:
            raise ValueError(f"layer kind {kind!r}: one of {', '.join(_KINDS)}")
        if isinstance(shape, int):
            shape = (shape,)
        shape = tuple(int(n) for n in shape)
        if not shape or any(n <= 0 for n in shape):
            raise ValueError(f"{kind} layer shape {shape}: positive sizes, at "
                             f"least one")
        name, itemsize, fmt = dtype_info(dtype)
        window = int(window)
        if kind == "ring" and window <= 0:
            raise ValueError(f"ring layer window {window}: a positive number "
                             f"of tokens")
        if kind != "ring" and window != 0:
            raise ValueError(f"{kind} layer: only ring layers have a window")
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", name)
        object.__setattr__(self, "window", window)
        object.__setattr__(self, "itemsize", itemsize)
        object.__setattr__(self, "format", fmt)

    def __setattr__(self, name, value):
        raise AttributeError("kvtier.Layer is immutable")

    @classmethod
    def kv(cls, shape, dtype="float32"):
        """A layer that grows by one row of ``shape`` per token."""
        return cls("kv", shape, dtype)

    @classmethod
    def ring(cls, window, shape, dtype="float32"):
        """A sliding window of ``window`` token rows (slot = position %
        window)."""
        return cls("ring", shape, dtype, window)

    @classmethod
    def recurrent(cls, shape, dtype="float32"):
        """A fixed-size state (an SSM's), valid only at its exact length."""
        return cls("recurrent", shape, dtype)

    @classmethod
    def object(cls, shape, dtype="float32"):
        """An exact tensor object of fixed size (an encoder output)."""
        return cls("object", shape, dtype)

    @property
    def row_bytes(self):
        """Bytes of one token row (kv, ring) or of the whole state."""
        return math.prod(self.shape) * self.itemsize

    @property
    def bytes_per_token(self):
        """kv, ring: bytes per token; 0 for recurrent and object layers."""
        return self.row_bytes if self.kind in ("kv", "ring") else 0

    def spec(self):
        """This layer in the service's ``model.layers`` syntax."""
        if self.kind == "kv":
            return f"kv:{self.row_bytes}"
        if self.kind == "ring":
            return f"ring:{self.row_bytes}:{self.window}"
        return f"{self.kind}:{self.row_bytes}"

    def _desc(self):
        return (self.kind, self.row_bytes, self.window, self.dtype,
                self.format, self.itemsize, self.shape)

    def __eq__(self, other):
        return isinstance(other, Layer) and self._desc() == other._desc()

    def __hash__(self):
        return hash(self._desc())

    def __repr__(self):
        w = f"window={self.window}, " if self.kind == "ring" else ""
        return (f"kvtier.Layer.{self.kind}({w}shape={self.shape}, "
                f"dtype={self.dtype!r})")


class Model:
    """The engine's model: ``identity`` (its own words for what the bytes
    mean: weights, tokenizer, KV dtype, quantisation) and ``layers``."""

    __slots__ = ("identity", "layers")

    def __init__(self, identity, layers):
        if not isinstance(identity, str):
            raise TypeError("Model identity: a string")
        layers = tuple(layers)
        if not layers:
            raise ValueError("Model layers: at least one layer")
        for i, l in enumerate(layers):
            if not isinstance(l, Layer):
                raise TypeError(f"Model layer {i}: a kvtier.Layer, not "
                                f"{type(l).__name__}")
        object.__setattr__(self, "identity", identity)
        object.__setattr__(self, "layers", layers)

    def __setattr__(self, name, value):
        raise AttributeError("kvtier.Model is immutable")

    def layers_text(self):
        """The layers in the service's ``model.layers`` syntax, equal runs
        folded (``32*kv:4096``)."""
        out = []
        i = 0
        while i < len(self.layers):
            j = i + 1
            while j < len(self.layers) and \
                    self.layers[j].spec() == self.layers[i].spec():
                j += 1
            n = j - i
            out.append(f"{n}*{self.layers[i].spec()}" if n > 1
                       else self.layers[i].spec())
            i = j
        return ",".join(out)

    @property
    def bytes_per_token(self):
        """Bytes per token over the kv and ring layers."""
        return sum(l.bytes_per_token for l in self.layers)

    def __eq__(self, other):
        return (isinstance(other, Model) and self.identity == other.identity
                and self.layers == other.layers)

    def __hash__(self):
        return hash((self.identity, self.layers))

    def __repr__(self):
        return f"kvtier.Model(identity={self.identity!r}, layers={list(self.layers)!r})"
