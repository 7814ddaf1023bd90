"""State survives a restart: a second Service on the same ssd-tier.dir finds
what the first made durable (prefixes, checkpoints, objects), byte for
byte."""

import numpy as np

import kvtier
from conftest import check_served, state


def options(tmp_path, **more):
    o = {"ssd-tier.dir": str(tmp_path / "ssd"), "log.level": "warn",
         "service.checkpoint-every-tokens": 8}
    o.update(more)
    return o


def test_restart_restores_prefixes_checkpoints_and_objects(model, tmp_path):
    prompts = [[i] + list(range(100, 140)) for i in range(3)]
    gen_req = kvtier.Request(77, list(range(500, 520)), max_new_tokens=8)
    generated = list(range(500, 520)) + [1, 2, 3]
    enc = np.linspace(0, 1, 64, dtype=np.float32)
    with kvtier.Service(model=model, options=options(tmp_path)) as svc:
        for i, p in enumerate(prompts):
            assert svc.publish(kvtier.Request(i, p), p,
                               state("ns", p, model), ns="ns").kept
        assert svc.checkpoint(gen_req, generated,
                              state("", generated, model))
        svc.release(gen_req, False)  # interrupted: its checkpoint stays
        assert svc.objects.put("enc:1", {"x": enc})
        ev = svc.flush()
        assert ev["durable"], ev
    # a second service on the same directory (the first one's lock is gone)
    with kvtier.Service(model=model, options=options(tmp_path)) as svc:
        saved = sorted((ns, list(t)) for ns, t in svc.saved_prefixes())
        assert saved == sorted(("ns", p) for p in prompts)
        for i, p in enumerate(prompts):
            acq = svc.acquire(kvtier.Request(10 + i, p + [9]), ns="ns")
            assert acq.source == "ssd"
            check_served(acq, "ns", p + [9], model)
        resumed = svc.acquire(gen_req)
        assert resumed.source == "checkpoint"
        assert [int(t) for t in resumed.tokens] == generated
        got = svc.objects.get("enc:1")
        np.testing.assert_array_equal(np.frombuffer(got["x"][0], np.float32),
                                      enc)
        assert svc.report()["ssd"]["restores_ok"] >= 3


def test_another_model_never_reads_these_files(model, tmp_path):
    p = list(range(1, 30))
    with kvtier.Service(model=model, options=options(tmp_path)) as svc:
        svc.publish(kvtier.Request(1, p), p, state("", p, model))
        assert svc.flush()["durable"]
    other = kvtier.Model("another identity", model.layers)
    with kvtier.Service(model=other, options=options(tmp_path)) as svc:
        assert svc.saved_prefixes() == []
        assert svc.acquire(kvtier.Request(2, p + [1])).source == "none"
