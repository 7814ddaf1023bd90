"""State crosses without a copy, both ways, and lent memory lives as long as
Python holds it: the data pointer numpy or torch sees is the buffer the
service holds; a lent array outlives eviction, close() and the service."""

import gc
import sys
import weakref

import numpy as np
import pytest
import torch

import kvtier
from conftest import check_served, data_ptr, rows, state


def test_publish_keeps_the_callers_numpy_buffer_not_a_copy(model,
                                                           make_service):
    svc = make_service(model)
    prompt = list(range(40))
    layers = state("", prompt, model)
    before = [sys.getrefcount(a) for a in layers]
    assert svc.publish(kvtier.Request(1, prompt), prompt, layers).kept
    # the service holds each array (its buffer export) ...
    assert [sys.getrefcount(a) for a in layers] == [b + 1 for b in before]
    ptrs = [data_ptr(a) for a in layers]
    weak = [weakref.ref(a) for a in layers]
    del layers
    gc.collect()
    # ... so the arrays live on after the engine dropped them
    assert all(w() is not None for w in weak)
    acq = svc.acquire(kvtier.Request(2, prompt + [1]))
    for lv, p in zip(acq.layers, ptrs):
        (seg,) = lv.segments
        assert seg.data_ptr == p                       # what the service holds
        assert data_ptr(np.asarray(seg)) == p          # what numpy sees
        assert data_ptr(torch.from_numpy(np.asarray(seg))) == p  # torch
        assert data_ptr(lv.array()) == p
        assert data_ptr(lv.tensor()) == p
    check_served(acq, "", prompt + [1], model)
    del acq, lv, seg
    svc.close()  # the service lets go: the arrays are freed
    gc.collect()
    assert all(w() is None for w in weak)


def test_publish_keeps_torch_cpu_tensors_without_a_copy(make_service):
    model = kvtier.Model("pytest torch", [
        kvtier.Layer.kv((2, 4), "float32"),
        kvtier.Layer.kv((2, 4), "bfloat16")])
    svc = make_service(model)
    prompt = list(range(16))
    k = torch.arange(16 * 8, dtype=torch.float32).reshape(16, 2, 4)
    v = torch.linspace(-1, 1, 16 * 8, dtype=torch.bfloat16).reshape(16, 2, 4)
    assert svc.publish(kvtier.Request(1, prompt), prompt, [k, v]).kept
    acq = svc.acquire(kvtier.Request(2, prompt + [3]))
    lk, lv = acq.layers
    assert lk.segments[0].data_ptr == k.data_ptr()
    assert lv.segments[0].data_ptr == v.data_ptr()
    tk, tv = lk.tensor(), lv.tensor()
    assert tk.data_ptr() == k.data_ptr() and tv.data_ptr() == v.data_ptr()
    assert tv.dtype == torch.bfloat16 and torch.equal(tv, v)
    assert torch.equal(tk, k)
    assert lv.dtype == "bfloat16" and lv.segments[0].format == "h"


def test_acquired_segments_come_back_shared_not_copied(model, make_service):
    svc = make_service(model)
    prompt = list(range(500, 564))
    first = prompt[:32]
    svc.publish(kvtier.Request(1, first), first, state("", first, model))
    one = svc.report()["ram"]["bytes"]
    acq = svc.acquire(kvtier.Request(2, prompt))
    assert acq.usable_tokens == 32
    # the engine extends the lent prefix with its own new rows
    layers = [lv.segments + [rows("", prompt, i, l, 32, 64)]
              for i, (lv, l) in enumerate(zip(acq.layers, model.layers))]
    donor_ids = {s.buffer_id for lv in acq.layers for s in lv.segments}
    assert svc.publish(kvtier.Request(2, prompt), prompt, layers).kept
    # the longer entry supersedes the shorter; its shared prefix is counted
    # once: RAM holds the first 32 rows once and the 32 new ones
    assert svc.report()["ram"]["bytes"] == 2 * one
    got = svc.acquire(kvtier.Request(3, prompt + [9]))
    check_served(got, "", prompt + [9], model)
    for lv in got.layers:
        assert lv.segments[0].buffer_id in donor_ids  # the donor's buffer


def test_a_numpy_slice_of_a_lent_array_is_reshared(model, make_service):
    svc = make_service(model)
    prompt = list(range(64))
    svc.publish(kvtier.Request(1, prompt), prompt, state("", prompt, model))
    acq = svc.acquire(kvtier.Request(2, prompt + [1]))
    arrs = [lv.array()[:20] for lv in acq.layers]  # numpy views
    ids = [lv.segments[0].buffer_id for lv in acq.layers]
    assert svc.publish(kvtier.Request(3, prompt[:20]), prompt[:20], arrs,
                       ns="b").kept
    got = svc.acquire(kvtier.Request(4, prompt[:20] + [5]), ns="b")
    assert [lv.segments[0].buffer_id for lv in got.layers] == ids
    assert [lv.segments[0].data_ptr for lv in got.layers] == \
        [data_ptr(a) for a in arrs]


def test_lent_arrays_outlive_eviction_close_and_the_service(model, tmp_path):
    svc = kvtier.Service(model=model, options={
        "ram-tier.cap-bytes": "1MiB", "log.level": "warn"})
    prompt = list(range(900, 964))
    published = state("", prompt, model)
    weak = [weakref.ref(a) for a in published]
    svc.publish(kvtier.Request(1, prompt), prompt, published)
    del published
    acq = svc.acquire(kvtier.Request(2, prompt + [1]))
    lent = [lv.array() for lv in acq.layers]
    tensors = [torch.from_numpy(a) for a in lent]
    segs = [lv.segments[0] for lv in acq.layers]
    del acq
    want = state("", prompt, model)
    # evict it: 1 MiB of other entries (each 64 tokens x 128 bytes)
    for i in range(140):
        p = [i + 10_000] + list(range(63))
        svc.publish(kvtier.Request(10 + i, p), p, state("", p, model))
    assert svc.report()["ram"]["evictions"] > 0
    assert svc.acquire(kvtier.Request(3, prompt + [1])).source == "none"
    for a, t, w in zip(lent, tensors, want):
        np.testing.assert_array_equal(a, w)
        np.testing.assert_array_equal(t.numpy(), w)
    svc.close()
    for a, w in zip(lent, want):
        np.testing.assert_array_equal(a, w)
    del svc
    gc.collect()
    for a, t, s, w in zip(lent, tensors, segs, want):
        np.testing.assert_array_equal(a, w)
        np.testing.assert_array_equal(t.numpy(), w)
        np.testing.assert_array_equal(np.asarray(s), w)
    assert all(w() is not None for w in weak)  # the lent memory is alive
    del lent, tensors, segs, a, t, s
    gc.collect()
    assert all(w() is None for w in weak)  # and freed once nothing holds it


def test_ssd_restored_arrays_outlive_the_service(model, tmp_path):
    opts = {"ssd-tier.dir": str(tmp_path / "ssd"), "log.level": "warn"}
    prompt = list(range(77, 141))
    with kvtier.Service(model=model, options=opts) as svc:
        svc.publish(kvtier.Request(1, prompt), prompt,
                    state("", prompt, model))
        assert svc.flush()["durable"]
    with kvtier.Service(model=model, options=opts) as svc:
        acq = svc.acquire(kvtier.Request(2, prompt + [1]))
        assert acq.source == "ssd"
        lent = [lv.array() for lv in acq.layers]
        del acq
    gc.collect()
    for a, w in zip(lent, state("", prompt, model)):
        np.testing.assert_array_equal(a, w)
    assert not lent[0].flags.writeable


def test_segments_are_read_only(model, make_service):
    svc = make_service(model)
    prompt = list(range(10))
    svc.publish(kvtier.Request(1, prompt), prompt, state("", prompt, model))
    seg = svc.acquire(kvtier.Request(2, prompt + [1])).layers[0].segments[0]
    with pytest.raises(TypeError, match="read-only"):
        memoryview(seg).cast("B")[0:1] = b"x"
    mv = memoryview(seg)
    assert mv.readonly and mv.format == "f" and mv.shape == (10, 2, 8)
    with pytest.raises(ValueError):
        np.asarray(seg)[0, 0, 0] = 1.0
