"""The *_async forms: asyncio futures that resolve on the caller's loop
(no thread parked per call), in any number at once; cancelling an
admit_queued takes it out of the queue; a closed loop is not kept."""

import asyncio
import gc
import threading
import time
import weakref

import numpy as np
import pytest

import kvtier
from conftest import check_served, state


def test_every_async_form(model, make_service):
    svc = make_service(model, ssd=True,
                       **{"service.checkpoint-every-tokens": 8})
    prompt = list(range(40, 80))

    async def main():
        loop_thread = threading.get_ident()
        req = kvtier.Request(1, prompt, max_new_tokens=4, session="s")
        fut = svc.acquire_async(req)
        assert isinstance(fut, asyncio.Future)
        resolved_on = []
        fut.add_done_callback(lambda f: resolved_on.append(
            threading.get_ident()))
        assert (await fut).source == "none"
        assert resolved_on == [loop_thread]
        assert await svc.keeps_async(req)
        assert (await svc.fits_async(req)).admitted
        assert (await svc.admit_async(req)).admitted
        res = await svc.publish_async(req, prompt[:30],
                                      state("", prompt[:30], model))
        assert res.kept
        assert await svc.peek_prefix_len_async(prompt) == 30
        acq = await svc.acquire_async(kvtier.Request(2, prompt))
        check_served(acq, "", prompt, model)
        del acq  # lent views would keep the entry's bytes from a boundary
        assert (await svc.route_async(prompt))["options"][0][
            "usable_tokens"] == 30
        gen = prompt + [1, 2]
        assert await svc.checkpoint_async(req, gen, state("", gen, model))
        rel = await svc.release_async(req, True)
        assert rel.checkpoints_removed == 1
        assert await svc.close_session_async("s") in (0, 1)
        fl = await svc.flush_async()
        assert fl["durable"]
        assert [list(t) for _, t in await svc.saved_prefixes_async()] == \
            [prompt[:30]]
        assert (await svc.boundary_async())["released"] == 1
        lease = await svc.prefetch_async(prompt)
        assert lease.info.tokens == 30
        lease.release()
        assert await svc.demote_idle_async(0) == 1
        assert isinstance(await svc.stop_idle_demotion_async(), bool)
        assert (await svc.stats_async())["pending_bytes"] == 0
        assert (await svc.report_async())["ram"]["hits"] >= 1
        assert (await svc.set_ssd_limit_async(1 << 30))["cap_bytes"] == \
            1 << 30
        relief = await svc.relieve_pressure_async(lambda: True)
        assert relief["released"] == 0
        objs = svc.objects
        assert await objs.put_async("k", {"a": np.ones(4, np.float32)})
        got = await objs.get_async("k")
        assert got["a"][0].nbytes == 16
        sub = await svc.subscribe_events_async(timeout=1)
        sub.end()
        closed = await svc.close_async()
        assert not closed["already_closed"]
        with pytest.raises(kvtier.ClosedError):
            await svc.acquire_async(req)

    asyncio.run(main())


def test_many_calls_at_once_on_one_loop(model, make_service):
    svc = make_service(model)
    before = threading.active_count()

    async def main():
        prompts = [[i] + list(range(1, 30)) for i in range(64)]
        await asyncio.gather(*[
            svc.publish_async(kvtier.Request(i, p), p, state("", p, model))
            for i, p in enumerate(prompts)])
        acqs = await asyncio.gather(*[
            svc.acquire_async(kvtier.Request(100 + i, p + [5]))
            for i, p in enumerate(prompts)])
        for a, p in zip(acqs, prompts):
            check_served(a, "", p + [5], model)
        assert threading.active_count() == before  # no thread per call

    asyncio.run(main())


def test_cancelling_admit_queued_leaves_the_queue(model, make_service):
    svc = make_service(model, **{"admission.kv-budget-bytes": "1MiB"})

    async def main():
        holder = kvtier.Request(1, list(range(8000)))
        assert (await svc.admit_async(holder)).admitted
        waiter = kvtier.Request(2, list(range(1000)))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(svc.admit_queued_async(waiter), 0.2)
        for _ in range(200):  # the withdrawal is a call of its own
            if svc.report()["admission"]["waiting"] == 0:
                break
            await asyncio.sleep(0.01)
        assert svc.report()["admission"]["waiting"] == 0
        # and a queued admit completes once budget frees
        fut = svc.admit_queued_async(waiter)
        await svc.release_async(holder, True)
        assert (await asyncio.wait_for(fut, 20)).admitted

    asyncio.run(main())


def test_a_closed_loop_is_not_kept_alive(model, make_service):
    svc = make_service(model, **{"admission.kv-budget-bytes": "1MiB"})
    assert svc.admit(kvtier.Request(1, list(range(8000)))).admitted
    loops = []

    async def main():
        loops.append(weakref.ref(asyncio.get_running_loop()))
        # never admitted while this loop runs: asyncio.run cancels it
        asyncio.ensure_future(
            svc.admit_queued_async(kvtier.Request(2, list(range(1000)))))
        await asyncio.sleep(0.05)

    asyncio.run(main())
    gc.collect()
    assert loops[0]() is None
    # the collected waiter was withdrawn from the queue
    for _ in range(2000):
        if svc.report()["admission"]["waiting"] == 0:
            break
        time.sleep(0.01)
    assert svc.report()["admission"]["waiting"] == 0


def test_async_needs_a_running_loop(model, make_service):
    svc = make_service(model)
    with pytest.raises(RuntimeError, match="no running event loop"):
        svc.acquire_async(kvtier.Request(1, [1, 2]))


def test_bad_input_raises_at_the_call(model, make_service):
    svc = make_service(model)

    async def main():
        with pytest.raises(ValueError, match="layers: 1 given"):
            svc.publish_async(kvtier.Request(1, [1, 2]), [1, 2],
                              [np.zeros((2, 2, 8), np.float32)])

    asyncio.run(main())
