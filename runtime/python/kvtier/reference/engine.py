"""The reference engine's loop: serving requests on real tensors, with kvtier
reuse (`KvtierEngine`) or with its K/V kept in its own memory (`LocalEngine`).

`KvtierEngine.serve` follows the order of calls of the C++ synthetic replay
engine (runtime/tools/replay.cpp, docs/replay.md "The engine loop"):

1. `peek_prefix_len` (what RAM holds now), then `prefetch` (cold reads start
   while the request is prepared; the lease holds what they install);
2. `admit` (holds the projected K/V bytes; when the budget says wait, the
   oldest running request is released first; a request that can never be
   admitted is refused and served nothing);
3. `acquire` the longest usable prefix: kvtier lends p rows of every layer,
   which are copied into the request's K/V buffers;
4. prefill only tokens [p, n) on top of them (`ReferenceModel.prefill`, in
   position-aligned chunks); the last token's logits are the first token's
   (time to first token is taken here); `publish` the prompt's state: each
   layer as the lent segments (shared, not copied) followed by the engine's
   own new rows (a view of its buffer, kept alive by kvtier, never written
   again); end the prefetch lease;
5. decode greedily, publishing a `checkpoint` every `checkpoint_every`
   tokens (the service's `service.checkpoint-every-tokens`);
6. `release(completed=True)` once more than `batch` requests run; close the
   session after its last request.

`LocalEngine` is the same model and the same chunks with no kvtier: told how
many tokens the kvtier run reused (p), it takes rows [0, p) from its own
store of the prompts it computed (or computes them, in a process that has
not), prefills [p, n) in the same chunks and decodes the same way, so its
logits must equal the kvtier run's bit for bit (`torch.equal`).

One engine per thread; the model's weights are shared read-only.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Callable, List, Optional, Tuple

import numpy as np
import torch

import kvtier

from .model import KVCache, ReferenceModel


@dataclasses.dataclass
class EngineRequest:
    """One request as the engine sees it (a trace request made concrete)."""

    id: int  # kvtier request id (the trace index + 1)
    ns: str
    prompt: List[int]
    max_new_tokens: int  # tokens decoded
    session: Optional[str] = None
    last_of_session: bool = False

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d: dict) -> "EngineRequest":
        return EngineRequest(**d)


@dataclasses.dataclass
class Served:
    """What serving one request gave."""

    id: int
    prompt_tokens: int
    reused: int = 0  # p: rows taken from kvtier (or from own memory)
    source: str = "none"  # acquire's answer: none, ram, ssd, checkpoint, peer
    tier: str = "none"  # where the reused rows came from: ram, ssd, peer
    refused: bool = False
    ttft_s: float = 0.0  # request start to the first token's logits
    logits: List[torch.Tensor] = dataclasses.field(default_factory=list)
    tokens: List[int] = dataclasses.field(default_factory=list)


def greedy_decode(model: ReferenceModel, cache: KVCache, first: torch.Tensor,
                  count: int,
                  on_token: Optional[Callable[[int, List[int]], None]] = None
                  ) -> Tuple[List[torch.Tensor], List[int]]:
    """Decodes `count` tokens greedily from the prompt's logits `first`:
    each chosen token is fed (its K/V appended), so the cache ends with
    prompt + count rows. Returns every logits vector (the prompt's first,
    then one per fed token) and the tokens. `on_token(k, tokens)` runs after
    the k-th token was fed."""
    logits, out = [first], []
    for k in range(1, count + 1):
        tok = int(torch.argmax(logits[-1]))
        out.append(tok)
        logits.append(model.decode(tok, cache))
        if on_token:
            on_token(k, out)
    return logits, out


class LocalEngine:
    """The reference engine keeping its K/V in its own memory: a store of
    the prompts it computed (their caches), least recently used first out
    past `cap_bytes`."""

    def __init__(self, model: ReferenceModel, cap_bytes: int = 1 << 30):
        self.model = model
        self.cap_bytes = cap_bytes
        self._store: "collections.OrderedDict[int, tuple]" = \
            collections.OrderedDict()  # key -> (ns, tokens array, cache)
        self._bytes = 0
        self._next = 0
        self.from_memory = 0  # requests whose prefix came from the store
        self.recomputed = 0  # ... that the store lacked (computed afresh)

    def _find(self, ns: str, prompt: np.ndarray, p: int) -> Optional[KVCache]:
        for key, (s_ns, toks, cache) in reversed(self._store.items()):
            if s_ns == ns and len(toks) >= p and \
                    np.array_equal(toks[:p], prompt[:p]):
                self._store.move_to_end(key)
                return cache
        return None

    def _keep(self, ns: str, prompt: np.ndarray, cache: KVCache) -> None:
        size = len(prompt) * self.model.cfg.kv_bytes_per_token
        self._store[self._next] = (ns, prompt, cache)
        self._next += 1
        self._bytes += size
        while self._bytes > self.cap_bytes and len(self._store) > 1:
            _, (_, toks, _) = self._store.popitem(last=False)
            self._bytes -= len(toks) * self.model.cfg.kv_bytes_per_token

    def serve(self, req: EngineRequest, reuse: int) -> Served:
        """Serves `req` reusing its first `reuse` tokens' K/V from memory."""
        m, n = self.model, len(req.prompt)
        prompt = np.asarray(req.prompt, dtype=np.uint32)
        out = Served(id=req.id, prompt_tokens=n, reused=reuse,
                     source="local" if reuse else "none")
        t0 = time.perf_counter()
        cache = KVCache(m.cfg, m.capacity_for(n + req.max_new_tokens))
        if reuse:
            src = self._find(req.ns, prompt, reuse)
            if src is None:  # not in this process's memory: compute it
                self.recomputed += 1
                src = KVCache(m.cfg, m.capacity_for(reuse))
                m.prefill(req.prompt[:reuse], src)
            else:
                self.from_memory += 1
            cache.load_prefix(src.rows(0, reuse), reuse)
        first = m.prefill(req.prompt, cache)
        out.ttft_s = time.perf_counter() - t0
        self._keep(req.ns, prompt, cache)
        out.logits, out.tokens = greedy_decode(m, cache, first,
                                               req.max_new_tokens)
        return out


class KvtierEngine:
    """The reference engine serving through a `kvtier.Service`."""

    def __init__(self, model: ReferenceModel, service,
                 checkpoint_every: Optional[int] = None,
                 batch: int = 1, settle: bool = True,
                 settle_deadline_s: float = 60.0,
                 tamper: Optional[Callable[[KVCache, int], None]] = None):
        """`checkpoint_every`: a checkpoint every this many decoded tokens
        (None: the service's `service.checkpoint-every-tokens`; 0: none).
        `settle` waits after the prefetch and the publish until no spill is
        pending, as `kvtier replay` does, so repeated runs see the same
        tiers.
        `tamper(cache, p)` (tests only) may change the lent rows after they
        were loaded, to show the comparison catches a wrong state."""
        self.model = model
        self.svc = service
        if checkpoint_every is None:
            checkpoint_every = service.checkpoint_every_tokens or 0
        self.checkpoint_every = checkpoint_every
        self.batch = max(batch, 1)
        self.settle = settle
        self.settle_deadline_s = settle_deadline_s
        self.tamper = tamper
        self.running: "collections.deque" = collections.deque()
        self.checkpoints = 0

    # -- helpers ----------------------------------------------------------

    def _settle(self) -> None:
        deadline = time.monotonic() + self.settle_deadline_s
        while True:
            s = self.svc.stats()
            if s.get("pending_spills", 0) == 0 and \
                    s.get("leaving_entries", 0) == 0:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"spills still pending after "
                                   f"{self.settle_deadline_s} s: {s}")
            time.sleep(0.001)

    def _peer_fetched(self) -> int:
        if self.svc.node_address is None:
            return 0
        return int(self.svc.report().get("peer", {}).get("fetched", 0))

    def _finish_oldest(self) -> None:
        self.svc.release(self.running.popleft(), True)

    def _admit(self, kreq) -> bool:
        """Admits `kreq`; False when it can never be admitted (refused)."""
        k = kvtier
        while True:
            try:
                d = self.svc.admit(kreq)
            except (k.PositionLimitError, k.OverBudgetError):
                return False
            if d.admitted:
                return True
            if not self.running:
                raise RuntimeError(f"request {kreq.id}: admission waits "
                                   "with nothing running")
            self._finish_oldest()


    # -- the loop ---------------------------------------------------------

    def serve(self, req: EngineRequest) -> Served:
        k, m, svc = kvtier, self.model, self.svc
        n = len(req.prompt)
        out = Served(id=req.id, prompt_tokens=n)
        t0 = time.perf_counter()
        before = svc.peek_prefix_len(req.prompt, ns=req.ns)
        fetched_before = self._peer_fetched()
        lease = svc.prefetch(req.prompt, ns=req.ns, session=req.session)
        try:
            if self.settle:
                self._settle()
            kreq = k.Request(req.id, req.prompt,
                             max_new_tokens=req.max_new_tokens,
                             session=req.session)
            if n == 0 or not self._admit(kreq):
                out.refused = True
                return out
            acq = svc.acquire(kreq, ns=req.ns)
            out.source = acq.source
            p = 0 if acq.source == "none" else min(acq.usable_tokens, n - 1)
            cache = KVCache(m.cfg, m.capacity_for(n + req.max_new_tokens))
            if p:
                load_lent(cache, acq.layers, p)
                if self.tamper:
                    self.tamper(cache, p)
            first = m.prefill(req.prompt, cache)
            out.ttft_s = time.perf_counter() - t0
            out.reused = p
            if p:
                cold = acq.source == "ssd" or (acq.source == "ram"
                                               and p > before)
                peer = acq.source == "peer" or (
                    cold and self._peer_fetched() > fetched_before)
                out.tier = "peer" if peer else (
                    "ssd" if cold else ("checkpoint"
                                        if acq.source == "checkpoint"
                                        else "ram"))
            svc.publish(kreq, req.prompt, layers_of(cache, n),
                        ns=req.ns)
            if self.settle:
                self._settle()
        finally:
            lease.release()
        out.logits, out.tokens = greedy_decode(
            m, cache, first, req.max_new_tokens,
            self._checkpointer(kreq, req, cache))
        self.running.append(kreq)
        while len(self.running) > self.batch:
            self._finish_oldest()
        if req.session and req.last_of_session:
            svc.close_session(req.session)
        return out

    def _checkpointer(self, kreq, req: EngineRequest, cache: KVCache):
        every = self.checkpoint_every
        if not every:
            return None
        n = len(req.prompt)

        def on_token(k: int, toks: List[int]) -> None:
            if k % every == 0:
                self.svc.checkpoint(kreq, list(req.prompt) + toks,
                                    layers_of(cache, n + k),
                                    ns=req.ns)
                self.checkpoints += 1

        return on_token

    def finish(self) -> None:
        """Releases every running request (completed)."""
        while self.running:
            self._finish_oldest()


def load_lent(cache: KVCache, views, p: int) -> None:
    """Copies the lent rows [0, p) of every kvtier layer (`LayerView`s, K0,
    V0, K1, ...) into the cache's buffers segment by segment (no
    concatenated copy first), and remembers the segments covering them
    (`cache.lent`: whole `Segment`s, a numpy view of a segment's first rows
    where p ends inside one) so a publish shares them instead of the
    copies."""
    bufs = [b for pair in zip(cache.k, cache.v) for b in pair]
    used = []
    for j, view in enumerate(views):
        row, segs = 0, []
        for seg in view.segments:
            if row == p:
                break
            a = np.asarray(seg)
            take = min(len(a), p - row)
            np.copyto(bufs[j][row:row + take].numpy(), a[:take])
            segs.append(seg if take == len(a) else a[:take])
            row += take
        if row != p:
            raise ValueError(f"layer {j} lent {row} rows, not {p}")
        used.append(segs)
    cache.length = p
    cache.lent = (used, p)


def layers_of(cache: KVCache, end: int) -> list:
    """The cache's rows [0, end) as kvtier layers: per layer the lent
    segments (shared, not copied) followed by the engine's own rows, a view
    of its buffer (kvtier keeps it alive; the engine never writes those
    rows again)."""
    segs, p = cache.lent
    own = cache.rows(p, end)
    if not p:
        return own
    return [s + [o] for s, o in zip(segs, own)]


class PromptCacheCodec:
    """`kvtier.PromptCache`'s codec for the reference model: a fetched
    prefix becomes a `KVCache` (the lent rows copied into its buffers, the
    lent segments remembered), and a cache is offered as, per layer, those
    segments followed by its own rows after them (the shared prefix is not
    copied again). Use: `kvtier.PromptCache(svc, codec.from_layers,
    codec.to_layers)`."""

    def __init__(self, model: ReferenceModel):
        self.model = model

    def from_layers(self, views, p: int) -> KVCache:
        cache = KVCache(self.model.cfg, self.model.capacity_for(p + 1))
        load_lent(cache, views, p)
        return cache

    def to_layers(self, cache: KVCache) -> list:
        return layers_of(cache, cache.length)
