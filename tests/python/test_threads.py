"""Many Python threads at once: 8 threads publish and acquire over shared
and private prefixes, every served state checked byte for byte; blocking
calls release the GIL."""

import threading
import time

import numpy as np

import kvtier
from conftest import check_served, rows, state

THREADS = 8
ROUNDS = 25


def engine_thread(svc, model, t, errors, served):
    try:
        system = list(range(1, 17))  # a system prompt every thread shares
        for r in range(ROUNDS):
            ns = "shared" if r % 2 == 0 else f"private-{t % 3}"
            prompt = system + [1000 * t + r % 5, 7, 8, 9] + \
                list(range(50, 50 + r % 7))
            req = kvtier.Request(t * 1000 + r, prompt, max_new_tokens=4)
            assert svc.admit(req).admitted
            acq = svc.acquire(req, ns=ns)
            n = acq.usable_tokens
            if acq.hit:
                check_served(acq, ns, prompt, model)
                served.append(n)
            # the engine's "prefill": the lent prefix plus its new rows
            layers = []
            for i, layer in enumerate(model.layers):
                new = rows(ns, prompt, i, layer, n, len(prompt))
                layers.append((acq.layers[i].segments if acq.hit else [])
                              + [new])
            res = svc.publish(req, prompt, layers, ns=ns)
            assert res.outcome in ("kept", "replaced")
            svc.release(req, True)
    except BaseException as e:  # noqa: B902 (reported by the main thread)
        errors.append((t, e))


def test_eight_threads_every_served_state_checked(model, make_service):
    svc = make_service(model, **{"ram-tier.cap-bytes": "1MiB"})
    errors, served = [], []
    threads = [threading.Thread(target=engine_thread,
                                args=(svc, model, t, errors, served))
               for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not any(th.is_alive() for th in threads)
    assert errors == []
    rep = svc.report()
    # every thread's first round misses at most; most rounds reuse
    assert len(served) >= THREADS * ROUNDS // 2
    assert rep["ram"]["hits"] == len(served)
    assert rep["admission"]["held_bytes"] == 0


def test_a_blocking_call_lets_other_threads_run(model, make_service):
    svc = make_service(model, **{"admission.kv-budget-bytes": "1MiB"})
    holder = kvtier.Request(1, list(range(8000)))
    assert svc.admit(holder).admitted
    waiter = kvtier.Request(2, list(range(1000)))
    inside = threading.Event()
    out = []

    def wait_for_budget():
        inside.set()
        out.append(svc.admit_queued(waiter, timeout=30))

    th = threading.Thread(target=wait_for_budget)
    th.start()
    assert inside.wait(10)
    # while that thread waits in kvtier, this one runs Python and calls
    # the service; if the wait held the GIL this would stall until the
    # other call's 30 s timeout, and `out` would hold a TimeoutError
    deadline = time.monotonic() + 20
    while svc.report()["admission"]["waiting"] == 0:
        assert time.monotonic() < deadline
    spins = sum(1 for _ in range(100000))
    assert spins == 100000 and not out
    svc.release(holder, True)
    th.join(30)
    assert out and out[0].admitted


def test_publish_from_one_thread_acquire_from_another(model, make_service):
    svc = make_service(model)
    prompt = list(range(3000, 3040))
    ready = threading.Event()
    got = []

    def consumer():
        assert ready.wait(10)
        got.append(svc.acquire(kvtier.Request(2, prompt + [1])))

    th = threading.Thread(target=consumer)
    th.start()
    arrays = state("", prompt, model)
    svc.publish(kvtier.Request(1, prompt), prompt, arrays)
    ready.set()
    th.join(30)
    check_served(got[0], "", prompt + [1], model)
    assert got[0].layers[0].segments[0].data_ptr == \
        arrays[0].__array_interface__["data"][0]


def test_a_service_goes_on_any_thread_while_its_callers_live(model):
    svc = kvtier.Service(model=model, options={"log.level": "warn"})
    called, leave = threading.Event(), threading.Event()

    def engine():
        svc.report()  # this thread's first call: its own scoped actor
        called.set()
        leave.wait(60)

    th = threading.Thread(target=engine)
    th.start()
    assert called.wait(30)
    # shut down on a third thread while this one (which made the service)
    # and the engine thread live
    closer = threading.Thread(target=svc._shutdown, daemon=True)
    closer.start()
    closer.join(60)
    finished = not closer.is_alive()
    leave.set()
    th.join(30)
    assert finished
