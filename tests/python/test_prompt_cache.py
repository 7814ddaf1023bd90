"""kvtier.PromptCache: mlx-lm's fetch_nearest_cache / insert_cache over a
service (docs/python.md, "Connector mapping"). An engine loop written
against that interface runs unchanged on an in-memory LRU prompt cache of
mlx-lm's shape and on kvtier, with the same logits bit for bit."""

from __future__ import annotations

import copy
import random
import re

import numpy as np
import pytest
import torch

import kvtier
from kvtier.reference import KVCache, ModelConfig, ReferenceModel, kvtier_model
from kvtier.reference.engine import PromptCacheCodec, greedy_decode

import reference_runs as runs

CFG = ModelConfig(layers=2, d_model=64, n_heads=4, d_ff=128, chunk=16)


class InMemoryPromptCache:
    """The shape of mlx-lm's LRUPromptCache, in memory: exact entry, else a
    longer one trimmed to the common prefix, else the longest shorter one,
    deep-copied (kvtier leaves one token to compute, and so does this one,
    so both hand the engine the same prefixes)."""

    def __init__(self):
        self.entries = {}

    def fetch_nearest_cache(self, model, tokens):
        best, best_p = None, 0
        for (m, toks), cache in self.entries.items():
            if m != model:
                continue
            lcp = 0
            while lcp < min(len(toks), len(tokens)) and \
                    toks[lcp] == tokens[lcp]:
                lcp += 1
            p = min(lcp, len(tokens) - 1)
            if p > best_p:
                best, best_p = cache, p
        if best is None:
            return None, list(tokens)
        cache = copy.deepcopy(best)
        cache.length = best_p
        cache.lent = ([], 0)
        return cache, list(tokens[best_p:])

    def insert_cache(self, model, tokens, cache, *, cache_type="assistant"):
        self.entries[(model, tuple(tokens))] = copy.deepcopy(cache)


def engine_turns(model, prompt_cache, key, turns, new_tokens=6):
    """A multi-turn chat written against the prompt-cache interface: each
    turn fetches the nearest cache, prefills the rest, decodes greedily and
    inserts the cache of everything so far. Returns the logits and the
    tokens reused per turn."""
    history, logits_all, reused = [], [], []
    for turn in turns:
        history += turn
        cache, rest = prompt_cache.fetch_nearest_cache(key, history)
        reused.append(len(history) - len(rest))
        if cache is None:
            cache = KVCache(model.cfg, 0)
        cache.reserve(model.capacity_for(len(history) + new_tokens))
        first = model.prefill(history, cache)
        logits, out = greedy_decode(model, cache, first, new_tokens)
        logits_all += logits
        history += out
        prompt_cache.insert_cache(key, history, cache)
    return logits_all, reused


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    return ReferenceModel(CFG, 4096)


@pytest.fixture
def svc():
    with kvtier.Service(model=kvtier_model(CFG),
                        options={"ram-tier.cap-bytes": "256MiB"}) as s:
        yield s


def chat(seed, turns=5):
    rng = random.Random(seed)
    return [[rng.randrange(32000) for _ in range(rng.randrange(5, 90))]
            for _ in range(turns)]


def test_an_engine_on_the_interface_gets_the_same_logits_from_kvtier(model,
                                                                     svc):
    turns = chat(1)
    mem_logits, mem_reused = engine_turns(model, InMemoryPromptCache(),
                                          "m", turns)
    codec = PromptCacheCodec(model)
    pc = kvtier.PromptCache(svc, codec.from_layers, codec.to_layers)
    kv_logits, kv_reused = engine_turns(model, pc, "m", turns)
    assert kv_reused == mem_reused
    assert kv_reused[0] == 0 and all(r > 0 for r in kv_reused[1:])
    assert len(kv_logits) == len(mem_logits)
    assert all(torch.equal(a, b) for a, b in zip(kv_logits, mem_logits))


def test_a_miss_is_none_and_every_token(svc):
    pc = kvtier.PromptCache(svc)
    assert pc.fetch_nearest_cache("m", [1, 2, 3]) == (None, [1, 2, 3])
    assert pc.fetch_nearest_cache("m", []) == (None, [])


def test_the_default_codec_lends_read_only_arrays_without_a_copy(svc):
    pc = kvtier.PromptCache(svc)
    rng = np.random.default_rng(3)
    n = 40
    layers = [rng.standard_normal((n, CFG.n_heads, CFG.head_dim),
                                  dtype=np.float32)
              for _ in range(2 * CFG.layers)]
    tokens = list(range(100, 100 + n))
    assert pc.insert_cache("m", tokens, layers).kept
    # An exact hit leaves the last token to compute.
    cache, rest = pc.fetch_nearest_cache("m", tokens)
    assert rest == tokens[-1:]
    assert len(cache) == 2 * CFG.layers
    for got, given in zip(cache, layers):
        assert got.shape == (n - 1, CFG.n_heads, CFG.head_dim)
        assert np.array_equal(got, given[:n - 1])
        assert not got.flags.writeable
        # Zero-copy: the lent rows are the very buffer that was published.
        assert got.__array_interface__["data"][0] == \
            given.__array_interface__["data"][0]
    # A longer prompt reuses all of them.
    cache, rest = pc.fetch_nearest_cache("m", tokens + [7, 8])
    assert rest == [7, 8] and cache[0].shape[0] == n


def test_models_are_namespaces(svc):
    pc = kvtier.PromptCache(svc)
    layers = [np.zeros((4, CFG.n_heads, CFG.head_dim), np.float32)
              for _ in range(2 * CFG.layers)]
    pc.insert_cache(("llama", "lora-a"), [1, 2, 3, 4], layers)
    assert pc.fetch_nearest_cache(("llama", "lora-b"), [1, 2, 3, 4, 5]) == \
        (None, [1, 2, 3, 4, 5])
    cache, rest = pc.fetch_nearest_cache(("llama", "lora-a"), [1, 2, 3, 4, 5])
    assert rest == [5]


def test_a_cache_that_does_not_cover_its_tokens_is_refused(svc):
    pc = kvtier.PromptCache(svc)
    layers = [np.zeros((3, CFG.n_heads, CFG.head_dim), np.float32)
              for _ in range(2 * CFG.layers)]
    with pytest.raises(ValueError):
        pc.insert_cache("m", [1, 2, 3, 4], layers)
    assert pc.fetch_nearest_cache("m", [1, 2, 3, 4, 5]) == \
        (None, [1, 2, 3, 4, 5])


def test_the_connector_mapping_example_in_the_docs_runs(capsys):
    # docs/python.md: a program written only from the page runs.
    text = (runs.REPO / "docs/python.md").read_text()
    section = text[text.index("## Connector mapping"):]
    code = re.findall(r"```python\n(.*?)```", section, re.S)
    assert code, "no python example in the Connector mapping section"
    exec(compile(code[0], "docs/python.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[1].startswith("reused ")
    assert int(out[1].split()[1]) > 0
