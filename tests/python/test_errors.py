"""Errors: one kvtier.Error subclass per ec, carrying ec and message; bad
input raises a Python exception naming what was wrong and loses nothing
else (nothing of a refused publish is kept, the service goes on)."""

import gc
import pickle
import sys

import numpy as np
import pytest
import torch

import kvtier
from conftest import check_served, state


def test_error_classes_carry_ec_and_message():
    e = kvtier.errors.from_ec("over_budget", "projected 9 bytes, budget 8")
    assert isinstance(e, kvtier.OverBudgetError) and isinstance(e,
                                                                kvtier.Error)
    assert (e.ec, e.message) == ("over_budget", "projected 9 bytes, budget 8")
    assert str(e) == "over_budget: projected 9 bytes, budget 8"
    assert kvtier.errors.error_class("closed") is kvtier.ClosedError
    assert kvtier.errors.error_class("no_such_code") is kvtier.Error
    assert issubclass(kvtier.InvalidArgumentError, ValueError)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is kvtier.OverBudgetError and back.message == e.message
    assert len({kvtier.errors.error_class(ec) for ec, _, _
                in kvtier.errors._CODES}) == 20


def test_admit_errors_over_budget_and_position_limit(model, make_service):
    svc = make_service(model, **{"admission.kv-budget-bytes": "1MiB",
                                 "admission.position-limit": 10000})
    too_big = kvtier.Request(1, list(range(100)), max_new_tokens=9000)
    with pytest.raises(kvtier.OverBudgetError) as e:
        svc.admit(too_big)
    assert e.value.ec == "over_budget" and "budget" in e.value.message
    with pytest.raises(kvtier.OverBudgetError):
        svc.fits(too_big)
    too_far = kvtier.Request(2, list(range(100)), max_new_tokens=20000)
    with pytest.raises(kvtier.PositionLimitError) as e:
        svc.admit(too_far)
    assert e.value.ec == "position_limit_exceeded"
    assert svc.admit(kvtier.Request(3, list(range(10)))).admitted


def test_admit_queued_times_out_and_leaves_the_queue(model, make_service):
    svc = make_service(model, **{"admission.kv-budget-bytes": "1MiB"})
    holder = kvtier.Request(1, list(range(8000)))
    assert svc.admit(holder).admitted
    waiter = kvtier.Request(2, list(range(1000)))
    with pytest.raises(kvtier.TimeoutError, match="left the queue"):
        svc.admit_queued(waiter, timeout=0.3)
    rep = svc.report()["admission"]
    assert rep["waiting"] == 0 and rep["held_bytes"] == 8000 * 128


def test_queue_full_and_cancelled(model, make_service):
    import threading
    svc = make_service(model, **{"admission.kv-budget-bytes": "1MiB",
                                 "admission.max-queued": 1})
    assert svc.admit(kvtier.Request(1, list(range(8000)))).admitted
    queued = kvtier.Request(2, list(range(1000)))
    out = []
    t = threading.Thread(target=lambda: out.append(
        pytest.raises(kvtier.CancelledError, svc.admit_queued, queued, 30)))
    t.start()
    deadline = __import__("time").monotonic() + 20
    while svc.report()["admission"]["waiting"] == 0:
        assert __import__("time").monotonic() < deadline
    with pytest.raises(kvtier.QueueFullError):
        svc.admit_queued(kvtier.Request(3, list(range(1000))), timeout=5)
    svc.release(queued, False)  # cancels the queued admit
    t.join(30)
    assert out and out[0].value.ec == "cancelled"


def test_invalid_config_names_the_key(model):
    with pytest.raises(kvtier.InvalidConfig, match="ram-tier.cap-bytes"):
        kvtier.Service(model=model, options={"ram-tier.cap-bytes": "1KiB"})
    with pytest.raises(kvtier.InvalidConfigError, match="ram-tier.no-such"):
        kvtier.Service(model=model, options={"ram-tier.no-such": 1})
    with pytest.raises(ValueError, match="section.key"):
        kvtier.Service(model=model, options={"nodot": 1})
    with pytest.raises(ValueError, match="model= argument"):
        kvtier.Service(model=model, options={"model.layers": "kv:4"})
    with pytest.raises(kvtier.InvalidConfig, match="cannot read"):
        kvtier.Service(model=model, config_file="/nonexistent/kvtier.conf")


def test_unsupported_and_locked(model, make_service, tmp_path):
    svc = make_service(model)
    with pytest.raises(kvtier.UnsupportedError):
        svc.set_ssd_limit(1 << 30)
    first = make_service(model, ssd=True)
    with pytest.raises(kvtier.LockedError):
        kvtier.Service(model=model, options={
            "ssd-tier.dir": str(tmp_path / "ssd"), "log.level": "warn"})
    assert first.report()["closed"] is False


def test_bad_tokens_name_the_bad_value(model, make_service):
    svc = make_service(model)
    with pytest.raises(ValueError, match=r"prompt\[2\]: -1 is not a token"):
        kvtier.Request(1, [1, 2, -1])
    with pytest.raises(ValueError, match="4294967296"):
        kvtier.Request(1, np.array([1, 2**32], dtype=np.int64))
    with pytest.raises(TypeError, match=r"prompt\[1\]: a float"):
        kvtier.Request(1, [1, 2.5])
    with pytest.raises(TypeError, match="float64"):
        kvtier.Request(1, np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="string"):
        svc.peek_prefix_len("hello")
    with pytest.raises(ValueError, match="Request id"):
        kvtier.Request(-1, [1])
    ok = kvtier.Request(7, torch.tensor([3, 4, 5]), max_new_tokens=2,
                        session="s", attempt=1)
    assert list(ok.prompt) == [3, 4, 5] and ok.session == "s"
    assert not ok.prompt.flags.writeable


@pytest.fixture
def baseline(model, make_service):
    svc = make_service(model)
    prompt = list(range(200, 232))
    svc.publish(kvtier.Request(1, prompt), prompt, state("", prompt, model))
    return svc, prompt, svc.report()["ram"]


def flat(layers):
    for x in layers:
        yield from (x if isinstance(x, list) else [x])


def refused(svc, baseline_ram, layers, match, exc=ValueError,
            tokens=list(range(32))):
    refs = [sys.getrefcount(x) for x in flat(layers)]
    live = kvtier.live_buffers()
    with pytest.raises(exc, match=match):
        svc.publish(kvtier.Request(5, tokens), tokens, layers, ns="bad")
    gc.collect()
    assert [sys.getrefcount(x) for x in flat(layers)] == refs  # none kept
    assert kvtier.live_buffers()[1] <= live[1]  # no new buffer held
    assert svc.report()["ram"] == baseline_ram


def test_bad_buffers_raise_naming_the_layer_and_keep_nothing(model,
                                                             baseline):
    svc, prompt, ram = baseline
    good = state("", list(range(32)), model)
    refused(svc, ram, [good[0], good[1][:31]],
            r"layer 1 \(kv float32\(2, 8\)\): 31 rows, the layer takes 32")
    refused(svc, ram, [good[0], good[1].astype(np.float64)],
            r"layer 1 .*dtype float64, the layer's is float32")
    refused(svc, ram, [good[0].reshape(32, 16), good[1]],
            r"layer 0 .*shape \(32, 16\), the layer takes \(rows, 2, 8\)")
    strided = np.repeat(good[0], 2, axis=0)[::2]
    refused(svc, ram, [strided, good[1]], r"layer 0 .*not C-contiguous")
    refused(svc, ram, [good[0]], r"layers: 1 given, the model has 2")
    refused(svc, ram, [good[0], "text"], r"layer 1 .*a str is not a buffer",
            exc=TypeError)
    refused(svc, ram, [good[0], torch.from_numpy(good[1]).to("meta")],
            r"layer 1 .*a tensor on meta: kvtier holds CPU memory")
    refused(svc, ram, [good[0], torch.from_numpy(good[1]).transpose(1, 2)],
            r"layer 1 .*not C-contiguous")
    refused(svc, ram, [good[0], torch.from_numpy(good[1]).half()],
            r"layer 1 .*dtype float16, the layer's is float32")
    # a bad piece after good ones in a list: the good ones are let go too
    refused(svc, ram, [[good[0][:16], good[0][16:]], [good[1][:16], None]],
            r"layer 1 .*, buffer 1: a NoneType is not a buffer", exc=TypeError)
    # refused by kvtier itself (empty tokens): kvtier.InvalidArgumentError
    refused(svc, ram, [good[0][:0], good[1][:0]], "no tokens",
            exc=kvtier.InvalidArgumentError, tokens=[])
    # and the service goes on, its state intact
    acq = svc.acquire(kvtier.Request(9, prompt + [1]))
    check_served(acq, "", prompt + [1], model)


def test_calls_after_shutdown_raise_closed(model):
    svc = kvtier.Service(model=model, options={"log.level": "warn"})
    svc._shutdown()
    for call in [lambda: svc.report(), lambda: svc.flush(),
                 lambda: svc.acquire(kvtier.Request(1, [1, 2])),
                 lambda: svc.objects, lambda: svc.subscribe_events()]:
        with pytest.raises(kvtier.ClosedError):
            call()
