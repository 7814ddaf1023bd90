"""Shared fixtures of the Python suites (tests/python/).

The oracle mirrors the C++ one (docs/oracle.md): a state's bytes are a pure
function of (namespace, layer, token prefix), so any state kvtier serves can
be checked against what a fresh prefill would have produced.
"""

import os

import numpy as np
import pytest

import kvtier

MASK = (1 << 64) - 1


def chain(ns, tokens):
    """h_i for every position: equal h_i means equal ns and prefix."""
    h = 1469598103934665603
    for c in ns.encode():
        h = ((h ^ c) * 1099511628211) & MASK
    out = np.empty(len(tokens), dtype=np.uint64)
    for i, t in enumerate(tokens):
        h = ((h ^ (int(t) + 0x9E3779B97F4A7C15)) * 0xBF58476D1CE4E5B9) & MASK
        h ^= h >> 31
        out[i] = h
    return out


def rows(ns, tokens, layer_index, layer, start=0, stop=None):
    """Rows start..stop of a kv/ring layer (token-major) for `tokens`."""
    stop = len(tokens) if stop is None else stop
    hs = chain(ns, tokens)[start:stop]
    n = int(np.prod(layer.shape))
    base = (hs + np.uint64(layer_index) * np.uint64(0x9E3779B1)) \
        & np.uint64(0xFFFF)
    vals = (base[:, None] + np.arange(n, dtype=np.uint64)[None, :]) \
        % np.uint64(2039)
    return vals.astype(layer.dtype).reshape((stop - start,) + layer.shape)


def state(ns, tokens, model):
    """One array per layer: the state a prefill of `tokens` makes."""
    return [rows(ns, tokens, i, l) for i, l in enumerate(model.layers)]


def check_served(acq, ns, prompt, model):
    """Every byte of an acquired state equals the oracle's for its tokens,
    which are a prefix of the prompt."""
    toks = [int(t) for t in acq.tokens]
    assert toks == [int(t) for t in prompt[:len(toks)]]
    assert len(toks) == acq.usable_tokens
    want = state(ns, toks, model)
    assert len(acq.layers) == len(model.layers)
    for lv, w in zip(acq.layers, want):
        np.testing.assert_array_equal(lv.array(), w)


@pytest.fixture
def model():
    return kvtier.Model("pytest kv2 f32", [
        kvtier.Layer.kv(shape=(2, 8), dtype="float32"),
        kvtier.Layer.kv(shape=(2, 8), dtype="float32")])


@pytest.fixture
def make_service(tmp_path):
    """make_service(model, **options) -> an open Service, closed after."""
    made = []

    def make(model, ssd=False, **options):
        opts = {"ram-tier.cap-bytes": "64MiB", "log.level": "warn",
                "service.storage-deadline-ms": 10000}
        if ssd:
            opts["ssd-tier.dir"] = str(tmp_path / "ssd")
        opts.update({k.replace("__", "."): v for k, v in options.items()})
        svc = kvtier.Service(model=model, options=opts)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        if not svc.closed:
            svc.close()


def data_ptr(x):
    """The address of the first byte numpy or torch sees."""
    if hasattr(x, "data_ptr") and callable(x.data_ptr):
        return x.data_ptr()
    return x.__array_interface__["data"][0]


@pytest.fixture
def build_dir():
    return os.environ.get("KVTIER_BUILD_DIR")
