"""subscribe_events: every change in seq order with no holes, as a callback
on an actor thread (under the GIL; what it raises is contained) or as an
iterator whose waits end by a timeout."""

import sys
import threading
import time

import kvtier
from conftest import state


def put(svc, model, first, n=24, rid=1):
    prompt = [first] + list(range(1, n))
    return svc.publish(kvtier.Request(rid, prompt), prompt,
                       state("", prompt, model))


def wait_for(pred, seconds=20.0):
    end = time.monotonic() + seconds
    while not pred():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.005)


def test_callback_gets_every_event_in_order_on_an_actor_thread(model,
                                                               make_service):
    # 1 MiB cap, 24 x 128-byte tokens an entry: later puts evict
    svc = make_service(model, **{"ram-tier.cap-bytes": "1MiB"})
    got, threads = [], set()

    def on_event(ev):
        got.append(ev)
        threads.add(threading.get_ident())

    sub = svc.subscribe_events(on_event)
    for i in range(400):
        put(svc, model, 10_000 + i, rid=i)
    wait_for(lambda: svc.report()["ram"]["evictions"] > 0
             and len(got) >= 400 + svc.report()["ram"]["evictions"])
    sub.end()
    seqs = [e.seq for e in got]
    assert seqs == list(range(1, len(got) + 1))  # from 1, no holes
    kinds = {e.kind for e in got}
    assert kinds == {"put", "evict"}
    first = got[0]
    assert (first.kind, first.tier, first.ns, first.trimmable) == \
        ("put", "ram", "", True)
    assert list(first.tokens) == [10_000] + list(range(1, 24))
    assert first.bytes == 24 * 128
    assert threading.get_ident() not in threads
    assert sub.delivered == len(got) and sub.errors == 0


def test_a_raising_callback_is_contained(model, make_service, monkeypatch):
    svc = make_service(model)
    hooked = []
    monkeypatch.setattr(sys, "unraisablehook", hooked.append)
    calls = []

    def bad(ev):
        calls.append(ev.seq)
        raise RuntimeError("callback bug")

    with svc.subscribe_events(bad) as sub:
        put(svc, model, 1)
        put(svc, model, 2, rid=2)
        wait_for(lambda: sub.errors == 2)
    assert calls == [1, 2] and len(hooked) == 2
    assert isinstance(hooked[0].exc_value, RuntimeError)
    assert not sub.active
    put(svc, model, 3, rid=3)  # the service goes on; no call after end()
    time.sleep(0.05)
    assert calls == [1, 2]
    assert svc.report()["ram"]["entries"] == 3


def test_a_callback_may_not_block_on_the_service(model, make_service):
    svc = make_service(model)
    seen = []

    def calls_back(ev):
        try:
            svc.report()
        except RuntimeError as e:
            seen.append(str(e))

    with svc.subscribe_events(calls_back):
        put(svc, model, 1)
        wait_for(lambda: seen)
    assert "would stall the service" in seen[0]


def test_iterator_in_order_and_timeout(model, make_service):
    svc = make_service(model, ssd=True)
    with svc.subscribe_events(timeout=10) as sub:
        put(svc, model, 1)
        put(svc, model, 2, rid=2)
        svc.flush()  # each becomes durable on SSD: two more events
        got = [next(sub) for _ in range(4)]
        assert [e.seq for e in got] == [1, 2, 3, 4]
        assert [(e.kind, e.tier) for e in got[:2]] == [("put", "ram")] * 2
        assert sorted((e.kind, e.tier) for e in got[2:]) == \
            [("durable", "ssd")] * 2
        assert sub.get(timeout=0.05) is None
        sub.timeout = 0.1
        try:
            next(sub)
            raise AssertionError("an iteration without events must end")
        except kvtier.TimeoutError as e:
            assert "no event within" in e.message
    assert list(sub) == []  # ended: iteration stops


def test_events_survive_other_threads(model, make_service):
    svc = make_service(model)
    sub = svc.subscribe_events(timeout=10)
    ths = [threading.Thread(target=lambda t=t: [
        put(svc, model, 100 * t + i, rid=100 * t + i) for i in range(20)])
        for t in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(60)
    got = [next(sub) for _ in range(80)]
    assert [e.seq for e in got] == list(range(1, 81))
    assert sub.drain() == []
    sub.end()


def test_a_service_dropped_by_its_own_callback_shuts_down(model):
    live = kvtier.live_buffers()
    box = [kvtier.Service(model=model, options={"log.level": "warn"})]
    sub = box[0].subscribe_events(lambda ev: box.clear())
    p = list(range(1, 20))
    box[0].publish(kvtier.Request(1, p), p, state("", p, model))
    # the callback drops the last reference on an actor thread: the service
    # is shut down from a thread of its own, not the actor's (which would
    # wait on itself), and lets go of what it held
    wait_for(lambda: not box)
    wait_for(lambda: kvtier.live_buffers()[1] <= live[1])
    sub.end()
