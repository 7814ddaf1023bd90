"""The first round trip: import, publish an engine's arrays, acquire them
back as lent views of the very same memory."""

import numpy as np

import kvtier
from conftest import check_served, data_ptr, state


def test_import_names_the_contract():
    for name in ["Service", "Model", "Layer", "Request", "Error",
                 "ClosedError", "TimeoutError", "OverBudgetError",
                 "InvalidConfig", "PositionLimitError"]:
        assert hasattr(kvtier, name), name


def test_publish_then_acquire_lends_the_published_memory(model, make_service):
    svc = make_service(model)
    prompt = list(range(100, 132))
    req = kvtier.Request(1, prompt[:24])
    miss = svc.acquire(req)
    assert miss.source == "none" and miss.layers == [] and not miss.hit
    layers = state("", prompt[:24], model)
    res = svc.publish(req, prompt[:24], layers)
    assert res.kept and res.outcome == "kept"
    acq = svc.acquire(kvtier.Request(2, prompt))
    assert acq.source == "ram" and acq.usable_tokens == 24
    check_served(acq, "", prompt, model)
    for published, lent in zip(layers, acq.layers):
        arr = lent.array()
        assert data_ptr(arr) == data_ptr(published)
        assert not arr.flags.writeable
