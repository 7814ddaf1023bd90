"""Serving a trace with the reference engine and checking every answer.

`engine_requests` turns a slice of a trace into engine requests (prompts
scaled as trace.py says, decode lengths capped). `check_run` serves them
with a `KvtierEngine` and checks each request twice:

- **exact**: a `LocalEngine` (the same model, its K/V kept in its own
  memory) serves the same request reusing the same number of tokens kvtier
  gave, in the same chunks: every logits vector (the prompt's, then one per
  decoded token) must be bit-identical (`torch.equal`). kvtier must hand
  back exactly the bytes it was given, or attention over them differs.
- **from scratch**: `ReferenceModel.prefill_whole` (the whole prompt as one
  matrix, no cache) then the same greedy decode: the greedy tokens must be
  equal and every logit within `LOGIT_ATOL` (different matrix shapes round
  differently; the largest difference is reported).

The report counts requests, tokens reused per tier, the mismatches (request
ids) and the figures; `ok` says whether nothing mismatched.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Callable, Dict, List, Optional

import torch

from .engine import EngineRequest, KvtierEngine, LocalEngine, greedy_decode
from .model import LOGIT_ATOL, ReferenceModel
from .trace import Trace, prompt_tokens


def engine_requests(trace: Trace, start: int = 0, count: int = 0,
                    tokens_per_block: Optional[int] = None,
                    max_prompt_tokens: int = 0,
                    max_new_tokens: int = 16) -> List[EngineRequest]:
    """Requests [start, start + count) of `trace` (count 0: to the end):
    prompts from the block ids (scaled to `tokens_per_block`, cut to
    `max_prompt_tokens`), decode lengths min(the trace's output,
    `max_new_tokens`), ids the trace index + 1, namespaces and sessions as
    `kvtier replay` gives them; a session is closed after its last request
    within the slice."""
    end = len(trace.requests) if count <= 0 else min(start + count,
                                                     len(trace.requests))
    reqs = trace.requests[start:end]
    last = {}
    for i, r in enumerate(reqs):
        if r.session:
            last[r.session] = i
    out = []
    for i, r in enumerate(reqs):
        out.append(EngineRequest(
            id=start + i + 1, ns=trace.request_ns(r),
            prompt=prompt_tokens(r, trace.block_size, tokens_per_block,
                                 max_prompt_tokens),
            max_new_tokens=min(r.output_tokens, max_new_tokens),
            session=r.session or None,
            last_of_session=bool(r.session) and last[r.session] == i))
    return out


@dataclasses.dataclass
class CheckReport:
    requests: int = 0
    refused: int = 0
    input_tokens: int = 0
    reused_tokens: Dict[str, int] = dataclasses.field(
        default_factory=lambda: {"ram": 0, "ssd": 0, "peer": 0,
                                 "checkpoint": 0})
    fresh_tokens: int = 0
    decoded_tokens: int = 0
    checkpoints: int = 0
    exact_checked: int = 0  # requests compared with LocalEngine
    exact_mismatches: List[int] = dataclasses.field(default_factory=list)
    whole_checked: int = 0  # requests compared with a prefill from scratch
    greedy_mismatches: List[int] = dataclasses.field(default_factory=list)
    tolerance_mismatches: List[int] = dataclasses.field(default_factory=list)
    max_whole_logit_diff: float = 0.0
    logit_atol: float = LOGIT_ATOL
    baseline_from_memory: int = 0
    baseline_recomputed: int = 0
    ttft_s: List[float] = dataclasses.field(default_factory=list)
    # Per request served: [id, prompt tokens, tokens reused, tier].
    served: List[list] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.exact_mismatches or self.greedy_mismatches
                    or self.tolerance_mismatches)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["ok"] = self.ok
        return d

    def summary(self) -> str:
        r = self.reused_tokens
        exact = self.exact_checked - len(self.exact_mismatches)
        greedy = self.whole_checked - len(self.greedy_mismatches)
        return (f"{self.requests} requests ({self.refused} refused), "
                f"{self.input_tokens} prompt tokens: reused ram {r['ram']} "
                f"ssd {r['ssd']} peer {r['peer']} checkpoint "
                f"{r['checkpoint']}, computed {self.fresh_tokens}; "
                f"bit-identical {exact}/{self.exact_checked}; greedy equal "
                f"to a full prefill {greedy}/{self.whole_checked}, largest "
                f"logit difference {self.max_whole_logit_diff:.3g} "
                f"(tolerance {self.logit_atol})")


def compare_whole(model: ReferenceModel, req: EngineRequest, logits,
                  tokens) -> (bool, float):
    """A prefill of `req` from scratch (`prefill_whole`) and the same greedy
    decode: (greedy tokens equal, largest |logit difference| over the steps
    both took in the same context)."""
    first, cache = model.prefill_whole(req.prompt,
                                       extra_rows=req.max_new_tokens)
    w_logits, w_tokens = greedy_decode(model, cache, first,
                                       req.max_new_tokens)
    same = w_tokens == tokens
    diff = 0.0
    for k, (a, b) in enumerate(zip(logits, w_logits)):
        diff = max(diff, float((a - b).abs().max()))
        if k < len(tokens) and tokens[k] != w_tokens[k]:
            break  # later steps decode different contexts
    return same, diff


def check_run(engine: KvtierEngine, requests: List[EngineRequest],
              baseline: Optional[LocalEngine] = None, whole: bool = True,
              progress: Optional[Callable[[int, CheckReport], None]] = None
              ) -> CheckReport:
    """Serves `requests` through `engine`, checking each against `baseline`
    (exact) and, with `whole`, against a prefill from scratch."""
    rep = CheckReport()
    model = engine.model
    for i, req in enumerate(requests):
        s = engine.serve(req)
        rep.requests += 1
        rep.input_tokens += s.prompt_tokens
        if s.refused:
            rep.refused += 1
            rep.fresh_tokens += s.prompt_tokens
            continue
        if s.reused:
            rep.reused_tokens[s.tier] += s.reused
        rep.fresh_tokens += s.prompt_tokens - s.reused
        rep.decoded_tokens += len(s.tokens)
        rep.ttft_s.append(s.ttft_s)
        rep.served.append([req.id, s.prompt_tokens, s.reused, s.tier])
        if baseline is not None:
            b = baseline.serve(req, s.reused)
            rep.exact_checked += 1
            if len(b.logits) != len(s.logits) or not all(
                    torch.equal(x, y) for x, y in zip(b.logits, s.logits)):
                rep.exact_mismatches.append(req.id)
        if whole:
            same, diff = compare_whole(model, req, s.logits, s.tokens)
            rep.whole_checked += 1
            rep.max_whole_logit_diff = max(rep.max_whole_logit_diff, diff)
            if not same:
                rep.greedy_mismatches.append(req.id)
            if diff > LOGIT_ATOL:
                rep.tolerance_mismatches.append(req.id)
        if progress:
            progress(i, rep)
    engine.finish()
    rep.checkpoints = engine.checkpoints
    if baseline is not None:
        rep.baseline_from_memory = baseline.from_memory
        rep.baseline_recomputed = baseline.recomputed
    return rep


def save_requests(path: str, requests: List[EngineRequest]) -> None:
    with open(path, "w") as f:
        json.dump([r.to_json() for r in requests], f)


def load_requests(path: str) -> List[EngineRequest]:
    with open(path) as f:
        return [EngineRequest.from_json(d) for d in json.load(f)]
