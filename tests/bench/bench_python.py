"""Round trips of the Python package, the shapes of bench_service's rows
(docs/api.md "Measured round trips"): run beside `build/bin/bench_service
--quick` in the same minute and compare.

    PYTHONPATH=build/python /usr/bin/python3 tests/bench/bench_python.py

Prints p50 and p99 in microseconds over N calls each (`--n`, default 2000).
"""

import argparse
import asyncio
import time

import numpy as np

import kvtier


def percentiles(samples):
    s = sorted(samples)
    return s[len(s) // 2] * 1e6, s[int(len(s) * 0.99)] * 1e6


def timed(f, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return percentiles(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    n = ap.parse_args().n
    model = kvtier.Model("bench_python fp16", [
        kvtier.Layer.kv((8, 64), "float16") for _ in range(32)])
    opts = {"ram-tier.cap-bytes": "1GiB", "log.level": "warn"}
    rows = []
    with kvtier.Service(model=model, options=opts) as svc:
        prompt = list(range(600))
        donor = [np.zeros((512, 8, 64), np.float16) for _ in range(32)]
        svc.publish(kvtier.Request(1, prompt[:512]), prompt[:512], donor)
        hit = kvtier.Request(2, prompt)
        miss = kvtier.Request(3, [9] * 600)
        for _ in range(200):
            svc.acquire(hit)
        rows.append(("acquire, RAM hit (512 of 600 tokens, 32 layers)",
                     timed(lambda: svc.acquire(hit), n)))
        rows.append(("acquire, RAM hit, every layer as a numpy array",
                     timed(lambda: [l.array() for l in
                                    svc.acquire(hit).layers], n)))
        rows.append(("acquire, miss", timed(lambda: svc.acquire(miss), n)))
        new = [np.zeros((64, 8, 64), np.float16) for _ in range(32)]
        count = [0]

        def publish():
            count[0] += 1
            p = [1_000_000 + count[0]] + list(range(63))
            svc.publish(kvtier.Request(5, p), p, new)

        rows.append(("publish (64 tokens, 32 layers)",
                     timed(publish, max(n // 2, 1))))

        async def awaited():
            out = []
            for _ in range(n):
                t = time.perf_counter()
                await svc.acquire_async(hit)
                out.append(time.perf_counter() - t)
            return percentiles(out)

        rows.append(("acquire_async, RAM hit, awaited", asyncio.run(awaited())))
    print(f"{'round trip':52} {'p50 us':>9} {'p99 us':>9}")
    for name, (p50, p99) in rows:
        print(f"{name:52} {p50:9.1f} {p99:9.1f}")


if __name__ == "__main__":
    main()
