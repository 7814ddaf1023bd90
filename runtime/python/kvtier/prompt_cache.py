"""`PromptCache`: kvtier behind mlx-lm's prompt-cache interface.

mlx-lm's server keeps prompt caches in an `LRUPromptCache` and calls two
methods on it:

    cache, rest = prompt_cache.fetch_nearest_cache(model, tokens)
    ... prefill `rest` on top of `cache` (a fresh cache when None), generate
    prompt_cache.insert_cache(model, tokens_the_cache_covers, cache)

`PromptCache` answers the same two calls from a `kvtier.Service`, so an
engine written against that interface swaps kvtier in (RAM, SSD, peers;
shared prefixes stored once) without changing its loop:

- `fetch_nearest_cache` is an `acquire`: the longest usable prefix p of
  `tokens` in the namespace of `model`, as a cache built by `from_layers`
  from the lent rows, and `tokens[p:]`; `(None, tokens)` on a miss. kvtier
  always leaves at least one token to compute (so the engine gets logits):
  an exact match gives back all but the last token, where mlx-lm would hand
  the whole cache and no tokens.
- `insert_cache` is a `publish` of `to_layers(cache)` under `tokens` (the
  tokens the cache covers). Whether it is kept is kvtier's policy (its RAM
  cap, spills to SSD); mlx-lm's `cache_type` (assistant/user/system
  eviction order) is accepted and not used.

A *codec* translates between the engine's cache object and kvtier's layers
(token-major arrays, one per kvtier layer, `kvtier.Model`'s order):

- `from_layers(views, p)` gets the lent `LayerView`s (p rows each) and
  returns the engine's cache; the default returns the list of read-only
  arrays (`LayerView.array()`: zero-copy for a single segment);
- `to_layers(cache)` returns, per kvtier layer, one C-contiguous buffer or a
  list of them (e.g. the segments it was lent followed by its own new rows,
  so the shared prefix is not copied); the default takes a list of arrays.

`model` (mlx-lm: the model key, a path or a tuple) names the namespace:
`ns(model)`, by default `str(model)`. Only use one `kvtier.Model` per
service: a namespace never crosses the service's model identity anyway.

Safe from many threads when the codec is (each call is one service call).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple


def _default_from_layers(views, p):
    return [v.array() for v in views]


def _default_to_layers(cache):
    return list(cache)


class PromptCache:
    """mlx-lm's `fetch_nearest_cache` / `insert_cache` over a service."""

    def __init__(self, service,
                 from_layers: Optional[Callable[[Sequence[Any], int],
                                                Any]] = None,
                 to_layers: Optional[Callable[[Any], List[Any]]] = None,
                 ns: Optional[Callable[[Any], str]] = None):
        self.service = service
        self._from_layers = from_layers or _default_from_layers
        self._to_layers = to_layers or _default_to_layers
        self._ns = ns or str
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _request(self, tokens):
        from . import Request  # the package's own

        with self._lock:
            rid = next(self._ids)
        return Request(rid, tokens)

    def fetch_nearest_cache(self, model: Any, tokens: Sequence[int]
                            ) -> Tuple[Optional[Any], List[int]]:
        """The cache of the longest usable prefix of `tokens` stored for
        `model`, and the tokens it does not cover; (None, tokens) when
        nothing is usable."""
        tokens = [int(t) for t in tokens]
        if len(tokens) < 2:  # nothing can be reused: one token to compute
            return None, tokens
        acq = self.service.acquire(self._request(tokens), ns=self._ns(model))
        p = 0 if acq.source == "none" else int(acq.usable_tokens)
        if p == 0:
            return None, tokens
        return self._from_layers(list(acq.layers), p), tokens[p:]

    def insert_cache(self, model: Any, tokens: Sequence[int], prompt_cache,
                     *, cache_type: str = "assistant"):
        """Offers `prompt_cache` (covering exactly `tokens`) to kvtier under
        `model`'s namespace; returns the service's `PublishResult`
        (`.kept` says whether it was kept)."""
        tokens = [int(t) for t in tokens]
        layers = self._to_layers(prompt_cache)
        return self.service.publish(self._request(tokens), tokens, layers,
                                    ns=self._ns(model))
