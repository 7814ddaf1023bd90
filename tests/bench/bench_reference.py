#!/usr/bin/python3
"""bench_reference: the reference engine's time to first token with kvtier
reuse, per prefix length and tier, beside its prefill of the same tokens.

For each prefix length L (default 512 ... 8192): a prompt of L + `chunk`
tokens (seeded random) whose first L tokens a previous request published.

- **prefill**: the engine computes the whole prompt from scratch (chunked,
  no kvtier call): its time to first token without reuse;
- **own**: the engine with the prefix's K/V in its own memory (the rows
  copied from its own buffer, the last `chunk` tokens prefilled): what
  reuse costs without kvtier, so each tier's figure minus this one is
  kvtier's part (the calls and the rows' trip from the tier);
- **ram**: peek, prefetch, admit, acquire (L rows lent from RAM), the rows
  copied into the engine's K/V buffers, the last `chunk` tokens prefilled;
- **ssd**: the same after `demote_idle(0)` moved the entry to SSD (written,
  fsynced, out of RAM) and the tier's files were dropped from the page cache
  (posix_fadvise DONTNEED), so the rows are read from the disk;
- **peer**: the same in a second engine process joined to this one as a
  cluster on loopback, the rows fetched from this process's RAM.

Every reuse's logits are checked bit-identical to the prefill's. A length
where restoring from a tier is slower than recomputing is named at the end.
A benchmark, not a test: it prints figures (and --json writes them).
Run from the build tree: `make bench-reference`, or
`PYTHONPATH=build/python /usr/bin/python3 tests/bench/bench_reference.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch


# The benchmark's model: larger than the tests' (16 KiB of K/V per token).
BENCH_MODEL = dict(layers=4, d_model=512, n_heads=8, d_ff=1408, chunk=128)


def _args(argv):
    from kvtier.reference import ModelConfig
    from kvtier.reference.__main__ import add_model_arguments

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default="512,1024,2048,4096,8192")
    add_model_arguments(p, ModelConfig(**BENCH_MODEL), threads=2)
    p.add_argument("--repeat", type=int, default=3,
                   help="measurements per figure (the median is shown)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--serve-peer", help=argparse.SUPPRESS)  # internal
    return p.parse_args(argv)


def _model(a, longest):
    from kvtier.reference import ReferenceModel
    from kvtier.reference.__main__ import (config_from_arguments,
                                           model_positions)

    cfg = config_from_arguments(a)
    return ReferenceModel(cfg, max_positions=model_positions(cfg, longest))


NS = "bench"
_ids = iter(range(1, 1 << 40))


def reuse_ttft(svc, model, tokens, cold="ssd"):
    """One request served with reuse: (seconds to the first token's logits,
    where the rows came from, tokens reused, logits). A RAM answer longer
    than RAM held before the prefetch was read by the prefetch: `cold`."""
    import kvtier
    from kvtier.reference import KVCache
    from kvtier.reference.engine import load_lent

    req = kvtier.Request(next(_ids), tokens, max_new_tokens=1)
    t0 = time.perf_counter()
    before = svc.peek_prefix_len(tokens, ns=NS)
    lease = svc.prefetch(tokens, ns=NS)
    try:
        if not svc.admit(req).admitted:
            raise RuntimeError("admission refused the benchmark request")
        acq = svc.acquire(req, ns=NS)
        p = 0 if acq.source == "none" else acq.usable_tokens
        cache = KVCache(model.cfg, model.capacity_for(len(tokens)))
        if p:
            load_lent(cache, acq.layers, p)
        logits = model.prefill(tokens, cache)
        dt = time.perf_counter() - t0
    finally:
        lease.release()
    svc.release(req, True)
    tier = cold if acq.source == "ram" and p > before else acq.source
    return dt, tier, p, logits


def serve_peer(a):
    """The second engine process: for each prompt on stdin (a JSON line),
    `repeat` times: a new service joins the cluster at --serve-peer (so the
    rows are not in its RAM yet), waits until its peer directory knows the
    benchmark's entries, and serves the prompt; answers one JSON line."""
    import kvtier
    from kvtier.reference import kvtier_model

    torch.set_num_threads(a.threads)
    lengths = [int(x) for x in a.lengths.split(",")]
    model = _model(a, max(lengths) + a.chunk)
    opts = {"ram-tier.cap-bytes": "8GiB", "cluster.enabled": True,
            "cluster.port": 0, "cluster.listen-address": "127.0.0.1",
            "cluster.peers": f'["{a.serve_peer}"]',
            "service.idle-demotion-ms": 0, "log.level": "error"}
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        times = []
        for _ in range(a.repeat):
            with kvtier.Service(model=kvtier_model(model.cfg),
                                options=opts) as svc:
                deadline = time.monotonic() + 120
                while True:
                    p = svc.report()["peer"]
                    if p["peers_up"] >= 1 and p["entries"] >= cmd["entries"]:
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the benchmark's node: {p}")
                    time.sleep(0.02)
                dt, source, got, logits = reuse_ttft(svc, model,
                                                     cmd["tokens"],
                                                     cold="peer")
                times.append(dt)
        print(json.dumps({"ttft_s": statistics.median(times),
                          "source": source, "reused": got,
                          "logits": logits.tolist()}), flush=True)


def _drop_page_cache(root):
    """Drops the SSD tier's files from the page cache (they are fsynced,
    so clean): the next read comes from the disk."""
    for d, _, files in os.walk(root):
        for f in files:
            fd = os.open(os.path.join(d, f), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _median_ms(xs):
    return statistics.median(xs) * 1e3


def main(argv=None):
    a = _args(sys.argv[1:] if argv is None else argv)
    if a.serve_peer:
        return serve_peer(a)
    import kvtier
    from kvtier.reference import KVCache, kvtier_model
    from kvtier.reference.__main__ import model_arguments

    torch.set_num_threads(a.threads)
    lengths = [int(x) for x in a.lengths.split(",")]
    model = _model(a, max(lengths) + a.chunk)
    cfg = model.cfg
    rng = random.Random(11)
    tmp = tempfile.mkdtemp(prefix="bench_reference.")
    ssd = os.path.join(tmp, "ssd")
    opts = {"ram-tier.cap-bytes": "8GiB", "ssd-tier.dir": ssd,
            "ssd-tier.cap-bytes": "16GiB", "cluster.enabled": True,
            "cluster.port": 0, "cluster.listen-address": "127.0.0.1",
            "service.idle-demotion-ms": 0, "log.level": "error"}
    print(f"model {cfg.identity}: {cfg.kv_bytes_per_token} K/V bytes per "
          f"token; torch threads {a.threads}; a prompt is the prefix + "
          f"{cfg.chunk} new tokens; median of {a.repeat} (the prefill "
          "past 2048 tokens: one run); "
          "! marks a tier slower than the prefill", flush=True)
    rows, slower = [], []
    with kvtier.Service(model=kvtier_model(cfg), options=opts) as svc:
        peer = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve-peer",
             svc.node_address, "--lengths", a.lengths, "--threads",
             str(a.threads), "--repeat", str(a.repeat),
             *model_arguments(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            _expect(peer, "ready")
            _print_head()
            published = 0
            for L in lengths:
                tokens = [rng.randrange(cfg.vocab)
                          for _ in range(L + cfg.chunk)]
                prefill = []
                for _ in range(a.repeat if L <= 2048 else 1):
                    cache = KVCache(cfg, model.capacity_for(len(tokens)))
                    t0 = time.perf_counter()
                    full = model.prefill(tokens, cache)
                    prefill.append(time.perf_counter() - t0)
                pub = svc.publish(kvtier.Request(next(_ids), tokens[:L]),
                                  tokens[:L], cache.rows(0, L), ns=NS)
                published += 1
                svc.flush()
                figures = {"prefix": L, "prefill_ms": _median_ms(prefill),
                           "kept": bool(pub.kept), "bytes": L *
                           cfg.kv_bytes_per_token}
                own = []
                for _ in range(a.repeat):
                    t0 = time.perf_counter()
                    mine = KVCache(cfg, model.capacity_for(len(tokens)))
                    mine.load_prefix(cache.rows(0, L), L)
                    same_own = torch.equal(model.prefill(tokens, mine), full)
                    own.append(time.perf_counter() - t0)
                figures["own_ms"] = _median_ms(own)
                ram = [reuse_ttft(svc, model, tokens) for _ in range(a.repeat)]
                figures["ram_ms"] = _median_ms([r[0] for r in ram])
                figures["ram_source"] = ram[0][1]
                same = same_own and all(torch.equal(r[3], full) and r[2] == L
                                        for r in ram)
                peer.stdin.write(json.dumps({"tokens": tokens,
                                             "entries": published}) + "\n")
                peer.stdin.flush()
                pr = json.loads(_expect(peer, "{"))
                figures["peer_ms"] = pr["ttft_s"] * 1e3
                figures["peer_source"] = pr["source"]
                same &= pr["reused"] == L and torch.equal(
                    torch.tensor(pr["logits"]), full)
                ssd_t = []
                for _ in range(a.repeat):
                    svc.demote_idle(0)
                    _drop_page_cache(ssd)
                    r = reuse_ttft(svc, model, tokens)
                    ssd_t.append(r[0])
                    figures["ssd_source"] = r[1]
                    same &= r[2] == L and torch.equal(r[3], full)
                figures["ssd_ms"] = _median_ms(ssd_t)
                figures["logits_equal"] = bool(same)
                rows.append(figures)
                _print_row(figures, slower)
        finally:
            peer.stdin.close()
            try:
                peer.wait(timeout=60)
            except subprocess.TimeoutExpired:
                peer.kill()
    shutil.rmtree(tmp, ignore_errors=True)
    if slower:
        print("restoring is slower than recomputing at: "
              + ", ".join(slower))
    else:
        print("restoring was faster than recomputing at every length "
              "and tier measured")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": cfg.identity, "rows": rows,
                       "slower": slower}, f, indent=1)
    return 0 if all(r["logits_equal"] for r in rows) else 1


def _expect(proc, prefix, deadline_s=600):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        ready, _, _ = select.select([proc.stdout], [], [], 5)
        if ready:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("the peer process exited")
            if line.startswith(prefix):
                return line
    raise TimeoutError(f"no '{prefix}' from the peer process")


def _print_head():
    print(f"{'prefix':>7} {'K/V MiB':>8} {'prefill ms':>11} {'own ms':>8} "
          f"{'ram ms':>9} {'ssd ms':>9} {'peer ms':>9}  served from, "
          "logits", flush=True)


def _print_row(f, slower):
    cells = []
    for tier in ("ram", "ssd", "peer"):
        ms = f[f"{tier}_ms"]
        mark = "!" if ms > f["prefill_ms"] else " "
        if ms > f["prefill_ms"]:
            slower.append(f"{f['prefix']} ({tier})")
        cells.append(f"{ms:8.1f}{mark}")
    print(f"{f['prefix']:>7} {f['bytes'] / 2**20:>8.1f} "
          f"{f['prefill_ms']:>11.1f} {f['own_ms']:>8.1f} {' '.join(cells)}  "
          f"{f['ram_source']}/{f['ssd_source']}/{f['peer_source']}, "
          f"{'bit-identical' if f['logits_equal'] else 'DIFFERENT'}",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
