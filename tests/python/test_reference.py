"""The reference engine (kvtier.reference, docs/python.md "The reference
engine"): its trace prompts, its arithmetic, and serving slices of the
conversation and WEKA traces through kvtier from RAM, from SSD after a
restart and from a peer engine process, every logit checked. The SSD and
peer runs are test_reference_tiers.py; the 200-request runs
test_reference_soak.py (label soak)."""

from __future__ import annotations

import random

import pytest
import torch

from kvtier.reference import (LOGIT_ATOL, KVCache, KvtierEngine, LocalEngine,
                              ModelConfig, ReferenceModel, check_run,
                              kvtier_model, load_trace, prompt_tokens)
from kvtier.reference.trace import MASK64

import kvtier
import reference_runs as runs


def fnv_tokens(tokens) -> int:
    h = 1469598103934665603
    for t in tokens:
        h = ((h ^ t) * 1099511628211) & MASK64
    return h


# (index, prompt length, FNV-1a of the tokens, namespace) as the C++ reader
# (runtime/tools/trace.cpp prompt_tokens, simulate.cpp request_ns) gives
# them for these requests at full scale: printed by a program linking it.
CPP_CONVERSATION = [
    (0, 6758, 17248480976073024925), (1, 7322, 17872520421219311640),
    (2, 7236, 1447913939116130736), (100, 2885, 8254985284417979220),
    (299, 979, 6808791166515725371)]
CPP_WEKA = [
    (0, 71175, 1956862454892524777), (1, 15161, 16607969218480834117),
    (2, 35760, 5456742715479470762), (100, 35011, 5359626741299869696),
    (299, 73031, 2364243166720856202)]


def test_prompts_are_the_ones_the_cpp_trace_reader_builds():
    conv = load_trace(str(runs.CONVERSATION), max_requests=300)
    for i, n, h in CPP_CONVERSATION:
        p = prompt_tokens(conv.requests[i], conv.block_size)
        assert (len(p), fnv_tokens(p)) == (n, h), i
        assert conv.request_ns(conv.requests[i]) == "conversation_trace.jsonl"
    weka = load_trace(str(runs.WEKA), max_requests=300)
    for i, n, h in CPP_WEKA:
        p = prompt_tokens(weka.requests[i], weka.block_size)
        assert (len(p), fnv_tokens(p)) == (n, h), i
        assert weka.request_ns(weka.requests[i]) == \
            "kv-cache-tester-weka/claude-opus-4-5-20251101"


def test_the_conversation_traces_block_hit_ratio_is_the_readmes():
    # tests/traces/README.md: infinite cache, block hit ratio 0.366.
    t = load_trace(str(runs.CONVERSATION))
    seen, hit, ref = set(), 0, 0
    for r in t.requests:
        h = 0
        while h < len(r.blocks) and r.blocks[h] in seen:
            h += 1
        hit, ref = hit + h, ref + len(r.blocks)
        seen.update(r.blocks)
    assert round(hit / ref, 3) == 0.366


def test_scaled_prompts_share_exactly_the_blocks_their_chains_share():
    t = load_trace(str(runs.CONVERSATION), max_requests=400)
    pairs = 0
    for a, b in zip(t.requests, t.requests[1:]):
        shared = 0
        while shared < min(len(a.blocks), len(b.blocks)) and \
                a.blocks[shared] == b.blocks[shared]:
            shared += 1
        pa = prompt_tokens(a, t.block_size, 16)
        pb = prompt_tokens(b, t.block_size, 16)
        lcp = 0
        while lcp < min(len(pa), len(pb)) and pa[lcp] == pb[lcp]:
            lcp += 1
        full = min(shared * 16, len(pa), len(pb))
        assert lcp >= full
        # Past the shared blocks the next tokens differ (a chance match of
        # a token or two is possible, 1/32000 each).
        assert lcp <= full + 2
        pairs += shared > 0
    assert pairs > 100


@pytest.fixture(scope="module")
def small():
    torch.set_num_threads(1)
    return ReferenceModel(ModelConfig(layers=2, d_model=64, n_heads=4,
                                      d_ff=128, chunk=16), 2048)


def test_a_tokens_kv_and_logits_depend_on_its_prefix_alone(small):
    # Wherever a reused prefix ends and however long the prompt is, the
    # position-aligned chunks compute every row with the same arithmetic.
    rng = random.Random(5)
    tokens = [rng.randrange(32000) for _ in range(300)]
    whole = KVCache(small.cfg, small.capacity_for(300))
    small.prefill(tokens, whole)
    for _ in range(25):
        n = rng.randrange(2, 301)
        p = rng.randrange(0, n)
        cache = KVCache(small.cfg, small.capacity_for(n))
        cache.load_prefix(whole.rows(0, p), p)
        logits = small.prefill(tokens[:n], cache)
        fresh = KVCache(small.cfg, small.capacity_for(n))
        assert torch.equal(logits, small.prefill(tokens[:n], fresh)), (n, p)
        for i in range(small.cfg.layers):
            assert torch.equal(cache.k[i][:n], whole.k[i][:n]), (n, p)
            assert torch.equal(cache.v[i][:n], whole.v[i][:n]), (n, p)


def test_chunked_and_whole_prompt_prefills_agree_within_the_tolerance(small):
    rng = random.Random(6)
    worst = 0.0
    for n in (1, 15, 16, 17, 200, 513):
        tokens = [rng.randrange(32000) for _ in range(n)]
        cache = KVCache(small.cfg, small.capacity_for(n))
        chunked = small.prefill(tokens, cache)
        whole, _ = small.prefill_whole(tokens)
        worst = max(worst, float((chunked - whole).abs().max()))
        assert int(chunked.argmax()) == int(whole.argmax())
    assert worst <= LOGIT_ATOL


@pytest.mark.parametrize("name", ["conversation", "weka"])
def test_serves_a_trace_from_ram_bit_identical_to_its_own_kv(name):
    rep = runs.serve_in_process(name)
    runs.assert_checked(rep.to_json(), len(runs.requests_for(name)))
    assert rep.reused_tokens["ram"] > 0
    assert rep.checkpoints > 0


def test_a_lent_row_that_changed_is_caught():
    # The exact comparison can fail: change one value of the rows kvtier
    # lent (after they were copied in) and every request that reused a
    # prefix mismatches.
    reqs = runs.requests_for("weka")[:6]
    model = runs.model_for(reqs)

    def tamper(cache, p):
        cache.v[0][p - 1, 0, 0] += 1e-3

    with kvtier.Service(model=kvtier_model(runs.CONFIG),
                        options=runs.service_options()) as svc:
        rep = check_run(KvtierEngine(model, svc, tamper=tamper), reqs,
                        LocalEngine(model), whole=False)
    reused = [rid for rid, _, p, _ in rep.served if p > 0]
    assert len(reused) >= 3, rep.served
    assert rep.exact_mismatches == reused, rep.summary()
