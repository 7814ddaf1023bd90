#!/usr/bin/python3
"""policy_bounds: how much better than LRU can an eviction policy do on a
trace, knowing only the past, and how much with a look at the future?

A block-level replay with the rules of `kvtier regret` (docs/eviction.md,
"The model"): a request hits the longest cached prefix of its block list,
then all of its blocks are stored (stamped tail-first), then leaves are
evicted until the cache holds at most C blocks. Each policy only orders the
leaves. The token hit ratio is the sum over requests of min(hit blocks x
block size, input tokens) over the input tokens. The LRU column is checked
against the figures `kvtier regret` prints (tests/traces/README.md: 0.045 /
0.266 on the conversation trace); the script stops if they disagree.

Policies that know the past only (the counts have perfect memory: no
ghost list runs out, an advantage the service does not have):

- `lfu`: fewest uses so far first (ties: least recently used);
- `lru-2`: blocks used once first, then the oldest second-to-last use;
- `lrfu-H`: the LRFU family between LRU and LFU (each use adds 1, halving
  every H x capacity blocks referenced), H = 1, 4, 16, 64;
- `fresh-first`: blocks used once first, then LRU (scan resistance alone).

Oracles (they know the future; no online policy can be told these):

- `popularity`: fewest uses over the whole trace first;
- `popularity>1`: blocks seen once so far first, then `popularity` (knows
  which reused blocks will be popular, not when they come back);
- `remaining`: fewest uses still to come first.

Then, where a request's first block names its document (the synthetic
trace; not the conversation trace, whose requests all start with one
system prompt), for every reuse of a first block in each quarter: how well does what is known at that moment
rank the time to its next use? Spearman's rank correlation of each
history feature (uses so far, the last gap, uses per request since its
first use, time since its first use) with the next use's nearness: 1
would be a perfect forecast, 0 none.

Run from the repository: `make policy-bounds`, or
`/usr/bin/python3 tests/bench/policy_bounds.py [--trace synthetic|conversation]
[--capacities 1,2,5]` (percent of the working set). Standard library only.
A measurement, not a test: it prints figures and exits 0 (1 when the LRU
check fails, 2 for bad usage).
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import heapq
import itertools
import json
import math
import os
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
TRACES = os.path.join(HERE, "..", "traces", "mooncake-fast25")
BLOCK = 512

# What `kvtier regret` prints for LRU at 1, 2, 5, 10 % of the working set
# (docs/eviction.md, "Results on the shipped traces").
LRU_REFERENCE = {
    "synthetic": {439: 0.0388, 878: 0.0793, 2196: 0.1596, 4392: 0.2673},
    "conversation": {1828: 0.0535, 3656: 0.0808, 9140: 0.1996,
                     18280: 0.2844},
}


def load(name: str) -> list[dict]:
    path = os.path.join(TRACES, name + "_trace.jsonl.gz")
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


class Block:
    """What a policy may know of a block (and, for oracles, its future)."""

    __slots__ = ("key", "uses", "touch", "request", "history", "crf")

    def __init__(self, key: int) -> None:
        self.key = key
        self.uses = 0        # requests that referenced it so far
        self.touch = 0       # blocks referenced when it was last touched
        self.request = -1    # the request that last touched it
        self.history = []    # the touches of its last two requests
        self.crf = 0.0       # LRFU's combined recency and frequency


def replay(trace: list[dict], cap: int, rank, on_touch=None) -> float:
    """The token hit ratio of a cache of `cap` blocks evicting the leaf
    with the smallest `rank(block, request index)` (computed when it
    becomes a leaf or is touched as one)."""
    cached: set[int] = set()
    children: dict[int, int] = {}
    parent: dict[int, int | None] = {}
    blocks: dict[int, Block] = {}
    heap: list = []
    version: dict[int, int] = {}
    ticket = itertools.count()
    hit = total = 0
    clock = 0

    def offer(b: int, now: int) -> None:
        v = next(ticket)
        version[b] = v
        heapq.heappush(heap, (rank(blocks[b], now), v, b))

    for now, r in enumerate(trace):
        hs = r["hash_ids"]
        n = len(hs)
        h = 0
        while h < n and hs[h] in cached:
            h += 1
        hit += min(h * BLOCK, r["input_length"])
        total += r["input_length"]
        for j in range(n - 1, -1, -1):  # tail-first: the head is newest
            clock += 1
            s = blocks.get(hs[j])
            if s is None:
                s = blocks[hs[j]] = Block(hs[j])
            if s.request != now:
                s.uses += 1
                s.history = (s.history + [clock])[-2:]
                if on_touch:
                    on_touch(s, clock)
            else:
                s.history[-1] = clock
            s.request = now
            s.touch = clock
        for j, b in enumerate(hs):
            if b not in cached:
                cached.add(b)
                children[b] = 0
                p = hs[j - 1] if j > 0 else None
                parent[b] = p
                if p is not None:
                    children[p] += 1
        for b in hs:
            if children[b] == 0:
                offer(b, now)
            else:
                version[b] = -1
        while len(cached) > cap:
            _, v, b = heapq.heappop(heap)
            if b not in cached or version.get(b) != v:
                continue
            cached.discard(b)
            p = parent.pop(b)
            del children[b]
            if p is not None:
                children[p] -= 1
                if children[p] == 0:
                    offer(p, now)
    return hit / total


def policies(trace: list[dict], cap: int):
    """(name, rank, on_touch, kind) for every policy measured."""
    total = Counter(b for r in trace for b in r["hash_ids"])
    uses_at = defaultdict(list)
    for i, r in enumerate(trace):
        for b in set(r["hash_ids"]):
            uses_at[b].append(i)

    def remaining(b: Block, now: int) -> int:
        u = uses_at[b.key]
        return len(u) - bisect.bisect_right(u, now)

    out = [
        ("lru", lambda b, now: (b.touch,), None, "past"),
        ("lfu", lambda b, now: (b.uses, b.touch), None, "past"),
        ("lru-2", lambda b, now: (0, b.touch) if len(b.history) < 2
         else (1, b.history[0]), None, "past"),
        ("fresh-first", lambda b, now: (0 if b.uses < 2 else 1, b.touch),
         None, "past"),
    ]
    for h in (1, 4, 16, 64):
        lam = 1.0 / (h * cap)

        def touch(b: Block, clock: int, lam=lam) -> None:
            b.crf = 1.0 + b.crf * 2.0 ** (-lam * (clock - b.touch))

        out.append(("lrfu-%d" % h,
                    lambda b, now, lam=lam: (math.log2(b.crf)
                                             + lam * b.touch,),
                    touch, "past"))
    out += [
        ("popularity", lambda b, now: (total[b.key], b.touch), None,
         "oracle"),
        ("popularity>1", lambda b, now: (0, b.touch) if b.uses < 2
         else (1, total[b.key], b.touch), None, "oracle"),
        ("remaining", lambda b, now: (remaining(b, now), b.touch), None,
         "oracle"),
    ]
    return out


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):  # average ranks over ties
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else 0.0


def predictability(trace: list[dict]) -> list[tuple]:
    """Per quarter of the trace: Spearman of each history feature with the
    nearness of the next use, over the reuses of first blocks."""
    seen = defaultdict(list)
    for i, r in enumerate(trace):
        seen[r["hash_ids"][0]].append(i)
    events = []
    for uses in seen.values():
        for k in range(1, len(uses)):
            t = uses[k]
            nxt = uses[k + 1] - t if k + 1 < len(uses) else len(trace)
            events.append((t, k + 1, t - uses[k - 1], t - uses[0], nxt))
    features = [
        ("uses so far", lambda e: e[1]),
        ("-last gap", lambda e: -e[2]),
        ("uses per request", lambda e: (e[1] - 1) / max(e[3], 1)),
        ("-time since first", lambda e: -e[3]),
    ]
    quarter = (len(trace) + 3) // 4
    rows = []
    for q in range(4):
        sub = [e for e in events if q * quarter <= e[0] < (q + 1) * quarter]
        if len(sub) < 10:
            continue
        near = [-e[4] for e in sub]
        rows.append((q + 1, len(sub),
                     [spearman([f(e) for e in sub], near)
                      for _, f in features]))
    return [name for name, _ in features], rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default="synthetic",
                    choices=["synthetic", "conversation"])
    ap.add_argument("--capacities", default="1,2,5",
                    help="percent of the working set, comma-separated")
    args = ap.parse_args()
    try:
        shares = [float(x) for x in args.capacities.split(",")]
        if not shares or any(s <= 0 or s > 100 for s in shares):
            raise ValueError
    except ValueError:
        print("policy_bounds: --capacities takes percents in (0, 100], "
              "comma-separated, not " + repr(args.capacities),
              file=sys.stderr)
        return 2
    trace = load(args.trace)
    working = len({b for r in trace for b in r["hash_ids"]})
    caps = [max(1, int(working * s / 100 + 0.5)) for s in shares]
    print("policy_bounds: %s trace, %d requests, working set %d blocks of "
          "%d tokens" % (args.trace, len(trace), working, BLOCK))
    results: dict[str, list[float]] = {}
    kinds: dict[str, str] = {}
    for cap in caps:
        for name, rank, touch, kind in policies(trace, cap):
            results.setdefault(name, []).append(
                replay(trace, cap, rank, touch))
            kinds[name] = kind
    lru = results["lru"]
    bad = [(c, round(v, 4), LRU_REFERENCE[args.trace][c])
           for c, v in zip(caps, lru)
           if c in LRU_REFERENCE[args.trace]
           and round(v, 4) != LRU_REFERENCE[args.trace][c]]
    if bad:
        print("policy_bounds: LRU disagrees with kvtier regret "
              "(capacity, here, there): %s" % bad, file=sys.stderr)
        return 1
    head = "%-14s %-7s" % ("policy", "knows")
    head += "".join(" %18s" % ("%g %% (%d)" % (s, c))
                    for s, c in zip(shares, caps))
    print(head)
    for name, vals in results.items():
        row = "%-14s %-7s" % (name, kinds[name])
        for v, base in zip(vals, lru):
            row += " %18s" % ("%.4f (%.2fx)" % (v, v / base))
        print(row)
    firsts = Counter(r["hash_ids"][0] for r in trace)
    if firsts.most_common(1)[0][1] * 2 > len(trace):
        print("\nNo forecast table: most requests share their first block "
              "(a system prompt), so it does not name a document.")
        return 0
    names, rows = predictability(trace)
    print("\nSpearman with the next use's nearness, reuses of first blocks:")
    print("%-8s %7s" % ("quarter", "reuses")
          + "".join(" %18s" % n for n in names))
    for q, n, cors in rows:
        print("%-8d %7d" % (q, n) + "".join(" %18.3f" % c for c in cors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
