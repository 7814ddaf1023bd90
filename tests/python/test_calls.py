"""Every call of kvtier.Service, in its blocking form, on a service without
and with an SSD tier; each answer checked against what the call promises
(docs/python.md)."""

import time
import urllib.request

import numpy as np
import pytest

import kvtier
from conftest import check_served, state


def publish(svc, model, prompt, rid=1, ns="", **kw):
    req = kvtier.Request(rid, prompt, **kw)
    return svc.publish(req, prompt, state(ns, prompt, model), ns=ns)


def wait_until(pred, seconds=20.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def test_acquire_peek_keeps_route_on_a_ram_service(model, make_service):
    svc = make_service(model)
    prompt = list(range(1, 41))
    assert svc.peek_prefix_len(prompt) == 0
    assert svc.keeps(kvtier.Request(1, prompt))
    assert publish(svc, model, prompt[:30]).kept
    assert svc.peek_prefix_len(prompt) == 30
    assert svc.peek_prefix_len(np.array(prompt, dtype=np.int64)) == 30
    acq = svc.acquire(kvtier.Request(2, prompt))
    assert (acq.source, acq.usable_tokens, acq.stale_checkpoint_tokens) == \
        ("ram", 30, 0)
    check_served(acq, "", prompt, model)
    # another namespace sees nothing
    assert svc.acquire(kvtier.Request(3, prompt), ns="other").source == "none"
    r = svc.route(prompt)
    assert r["chosen"]["node_id"] == "" and r["best"] == 0
    assert r["options"][0]["usable_tokens"] == 30
    assert svc.node_address is None and svc.http_address is None


def test_publish_supersedes_and_replaces(model, make_service):
    svc = make_service(model)
    prompt = list(range(7, 47))
    assert publish(svc, model, prompt[:10]).outcome == "kept"
    longer = publish(svc, model, prompt[:20])
    assert longer.kept and longer.superseded == 1
    assert publish(svc, model, prompt[:20]).outcome == "replaced"
    rep = svc.report()
    assert rep["ram"]["entries"] == 1 and rep["ram"]["supersessions"] == 1


def test_admission_admit_fits_queue_release(model, make_service):
    # 2 layers x 64 bytes = 128 bytes per token; 1 MiB = 8192 tokens
    svc = make_service(model, **{"admission.kv-budget-bytes": "1MiB"})
    big = kvtier.Request(1, list(range(4000)), max_new_tokens=2000)
    other = kvtier.Request(2, list(range(3000)), max_new_tokens=1000)
    d = svc.fits(big)
    assert d.admitted and d.projected_bytes == 6000 * 128
    assert svc.admit(big).admitted
    f = svc.fits(other)
    assert not f.admitted and f.available_bytes == (1 << 20) - 6000 * 128
    assert not svc.admit(other)
    r = svc.release(big, False)
    assert r.released_bytes == 6000 * 128
    q = svc.admit_queued(other, timeout=20)
    assert q.admitted
    assert svc.report()["admission"]["held_bytes"] == 4000 * 128
    svc.release(other, True)


def test_checkpoint_resumes_then_completion_removes_it(model, make_service):
    svc = make_service(model, **{"service.checkpoint-every-tokens": 16})
    assert svc.checkpoint_every_tokens == 16
    prompt = list(range(50, 70))
    generated = prompt + [5, 6, 7, 8]
    req = kvtier.Request(9, prompt, max_new_tokens=8)
    assert svc.checkpoint(req, generated, state("", generated, model))
    acq = svc.acquire(req)
    assert acq.source == "checkpoint" and acq.usable_tokens == len(generated)
    assert [int(t) for t in acq.tokens] == generated
    rel = svc.release(req, True)
    assert rel.checkpoints_removed == 1 and not rel.removal_pending
    assert svc.acquire(req).source != "checkpoint"


def test_sessions_and_boundary_and_latency(model, make_service):
    svc = make_service(model)
    prompt = list(range(300, 340))
    req = kvtier.Request(1, prompt, session="conv-1")
    assert svc.publish(req, prompt, state("", prompt, model)).kept
    assert svc.close_session("conv-1") in (0, 1)
    assert svc.close_session("never-opened") == 0
    b = svc.boundary()
    assert set(b) >= {"released", "released_bytes", "dropped", "dropped_bytes"}
    dropped = svc.boundary(want_bytes=1 << 40)
    assert dropped["dropped"] == 1  # optional, durable nowhere: dropped
    lat = svc.latency()
    assert lat["publish"]["count"] >= 1 and "buckets" in lat["acquire"]


def test_ssd_calls_flush_prefetch_demote_limit_saved(model, make_service):
    svc = make_service(model, ssd=True,
                       **{"ssd-tier.write-behind": False})
    prompt = list(range(1000, 1064))
    assert publish(svc, model, prompt[:48]).kept
    st = svc.stats()
    assert set(st) >= {"pending_snapshots", "pending_spills", "pending_bytes"}
    fl = svc.flush()
    assert fl["durable"] and fl["longest_durable_prefix"] == 48
    saved = svc.saved_prefixes()
    assert [(ns, list(t)) for ns, t in saved] == [("", prompt[:48])]
    # RAM gives back its durable copy; a prefetch reads it back in
    assert svc.boundary()["released"] == 1
    assert svc.peek_prefix_len(prompt) == 0
    with svc.prefetch(prompt) as lease:
        assert lease.active
        assert lease.info.reads_started == 1 and lease.info.tokens == 48
        assert svc.peek_prefix_len(prompt) == 48
        acq = svc.acquire(kvtier.Request(2, prompt))
        check_served(acq, "", prompt, model)
    assert not lease.active and not lease.release()
    # idle demotion: durable already, so it just leaves RAM
    assert svc.demote_idle(0) == 1
    assert svc.report()["demotions"] >= 1
    assert isinstance(svc.stop_idle_demotion(), bool)
    lim = svc.set_ssd_limit(1 << 20)
    assert lim["cap_bytes"] == 1 << 20 and lim["file_bytes"] <= 1 << 20


def test_relieve_pressure_runs_the_check_until_it_holds(model, make_service):
    svc = make_service(model, ssd=True)
    for i in range(4):
        publish(svc, model, [i + 1] + list(range(2000, 2030)), rid=i)
    calls = []

    def check():
        calls.append(svc.report()["ram"]["entries"])
        return len(calls) > 2

    r = svc.relieve_pressure(check)
    assert len(calls) == 3 and r["released"] == 2 and r["error"] is None
    assert svc.report()["ram"]["entries"] == 2


def test_relieve_pressure_passes_the_checks_exception_on(model, make_service):
    svc = make_service(model)
    publish(svc, model, list(range(1, 20)))

    def check():
        raise RuntimeError("engine check failed")

    with pytest.raises(RuntimeError, match="engine check failed"):
        svc.relieve_pressure(check)
    assert svc.report()["ram"]["entries"] == 1


def test_objects_put_get(model, make_service):
    svc = make_service(model)
    cache = svc.objects
    enc = np.arange(96, dtype=np.float32).reshape(4, 24)
    assert cache.put("image:1", {"enc": enc, "mask": b"\x01\x02"})
    got = cache.get("image:1")
    assert set(got) == {"enc", "mask"}
    (seg,) = got["enc"]
    assert seg.nbytes == enc.nbytes
    np.testing.assert_array_equal(
        np.frombuffer(seg, dtype=np.float32).reshape(4, 24), enc)
    assert bytes(np.asarray(got["mask"][0])) == b"\x01\x02"
    assert cache.get("image:2") is None


def test_objects_absent_when_configured_off(model, make_service):
    svc = make_service(model, **{"ram-tier.objects": False})
    assert svc.objects is None


def test_http_endpoint_address(model, make_service):
    svc = make_service(model, **{"http.enabled": True, "http.port": 0})
    addr = svc.http_address
    assert addr and addr.startswith("127.0.0.1:")
    with urllib.request.urlopen(f"http://{addr}/health", timeout=10) as r:
        assert r.status == 200


def test_close_returns_evidence_and_is_idempotent(model, make_service):
    svc = make_service(model)
    publish(svc, model, list(range(1, 9)))
    first = svc.close()
    assert not first["durable"] and not first["already_closed"]
    assert "errors" in first and svc.closed
    again = svc.close()
    assert again["already_closed"]
    # what C++ answers after close still answers
    assert svc.report()["closed"]
    assert publish(svc, model, list(range(1, 9))).outcome == "dropped_closed"
    with pytest.raises(kvtier.ClosedError) as e:
        svc.acquire(kvtier.Request(1, [1, 2, 3]))
    assert e.value.ec == "closed" and e.value.message


def test_with_block_closes_and_shuts_down(model):
    with kvtier.Service(model=model, options={"log.level": "warn"}) as svc:
        assert not svc.closed
    assert svc.closed
    with pytest.raises(kvtier.ClosedError, match="shut down"):
        svc.report()


def test_service_without_model_lends_raw_bytes(make_service):
    svc = kvtier.Service(options={"model.layers": "2*kv:16",
                                  "log.level": "warn"})
    try:
        assert [l.dtype for l in svc.model.layers] == ["uint8", "uint8"]
        prompt = list(range(10))
        rows = [np.full((10, 16), i, dtype=np.uint8) for i in range(2)]
        assert svc.publish(kvtier.Request(1, prompt), prompt, rows).kept
        acq = svc.acquire(kvtier.Request(2, prompt + [1]))
        np.testing.assert_array_equal(acq.layers[1].array(), rows[1])
    finally:
        svc.close()


def test_mixed_layer_kinds(make_service):
    model = kvtier.Model("pytest mixed", [
        kvtier.Layer.kv((4,), "float16"),
        kvtier.Layer.ring(window=8, shape=(2, 2), dtype="float32"),
        kvtier.Layer.recurrent((3, 5), "float64")])
    assert model.layers_text() == "kv:8,ring:16:8,recurrent:120"
    svc = make_service(model)
    prompt = list(range(20))
    layers = [np.ones((20, 4), np.float16),
              np.arange(8 * 4, dtype=np.float32).reshape(8, 2, 2),
              np.full((3, 5), 2.5)]
    assert svc.publish(kvtier.Request(1, prompt), prompt, layers).kept
    # a recurrent layer is valid only at its exact length: a longer prompt
    # gets it back whole
    acq = svc.acquire(kvtier.Request(2, prompt + [7]))
    assert acq.usable_tokens == 20
    kinds = [l.kind for l in acq.layers]
    assert kinds == ["kv", "ring", "recurrent"]
    assert acq.layers[1].array().shape == (8, 2, 2)
    np.testing.assert_array_equal(acq.layers[2].array(), layers[2])
    assert acq.layers[2].array().dtype == np.float64


def test_attachments_round_trip(model, make_service):
    svc = make_service(model)
    prompt = list(range(60, 80))
    draft = np.arange(12, dtype=np.int32)
    req = kvtier.Request(1, prompt)
    assert svc.publish(req, prompt, state("", prompt, model),
                       attachments={"draft": draft}).kept
    acq = svc.acquire(kvtier.Request(2, prompt + [1]))
    (seg,) = acq.attachments["draft"]
    np.testing.assert_array_equal(np.frombuffer(seg, np.int32), draft)


def test_config_file_under_options(model, tmp_path):
    conf = tmp_path / "kvtier.conf"
    conf.write_text("[ram-tier]\ncap-bytes=32MiB\n[admission]\n"
                    "position-limit=4096\n")
    with kvtier.Service(model=model, config_file=conf,
                        options={"admission.position-limit": 2048,
                                 "log.level": "warn"}) as svc:
        assert svc.report()["ram"]["cap_bytes"] == 32 << 20  # the file's
        with pytest.raises(kvtier.PositionLimitError, match="2048"):
            svc.admit(kvtier.Request(1, list(range(2000)),
                                     max_new_tokens=100))  # the option's


def test_cluster_node_address(model, make_service):
    svc = make_service(model, **{"cluster.enabled": True, "cluster.port": 0})
    addr = svc.node_address
    assert addr and addr.startswith("127.0.0.1:") and \
        int(addr.rsplit(":", 1)[1]) > 0
    r = svc.route(list(range(10)))
    assert r["chosen"]["address"] == addr


def test_priority_and_pin_ride_on_the_request(model, make_service):
    svc = make_service(model, **{"ram-tier.pin-share": 0.5})
    req = kvtier.Request(1, [1, 2, 3], priority=90, pin_ms=60000)
    assert (req.priority, req.pin_ms) == (90, 60000)
    assert kvtier.Request(1, [1]).priority == 35
    with pytest.raises((ValueError, OverflowError, TypeError)) as err:
        kvtier.Request(1, [1], priority=101)
    assert "priority" in str(err.value)
    prompt = list(range(1, 41))
    res = publish(svc, model, prompt, priority=90, pin_ms=60000)
    assert res.kept and res.pinned and not res.pin_refused
    ram = svc.report()["ram"]
    assert ram["pins_granted"] == 1 and ram["pinned_entries"] == 1
    assert ram["pinned_bytes"] > 0
    # No budget: the pin is refused, the state kept.
    other = make_service(model, **{"ram-tier.pin-share": 0})
    res = publish(other, model, prompt, pin_ms=1000)
    assert res.kept and res.pin_refused and not res.pinned
