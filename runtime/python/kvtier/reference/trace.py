"""The repository's request traces as token prompts, for the reference engine.

A Python reading of the C++ trace reader (runtime/tools/trace.cpp, described in
docs/traces.md) for the two formats whose requests share prefixes: mooncake
(JSONL, 512-token prefix-chained blocks, the last one partial) and weka (one
JSON conversation per file, 64-token blocks, only full blocks hashed, nested
`subagent` requests flattened; a directory merges every file). Block ids become
the same 64-bit keys, namespaces and sessions are the same, and a block expands
into the same tokens: token j of a block is `fmix64(key ^ ((j + 1) * golden)) %
vocab`, the tokens no block covers are drawn from the request's own seed. So
two prompts share exactly the prefix their block chains share, as in `kvtier
replay`.

The one difference is the scale. A CPU reference transformer cannot prefill
the traces' 12k-token (mooncake) or 50k-token (weka) prompts hundreds of times
in a test, so `tokens_per_block` may be smaller than the trace's block size: a
block then stands for its first `tokens_per_block` tokens, every length in the
request (input, uncovered tail) is scaled by the same factor (rounded up), and
`max_prompt_tokens` cuts the prompt (a cut keeps the prefix structure: two cut
prompts share min(shared, cut) tokens). With `tokens_per_block` equal to the
trace's block size and no cut, the prompt is token for token the one `kvtier
replay` builds.

Plain functions and values; nothing here touches kvtier or torch.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
from typing import List, Optional

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def fmix64(k: int) -> int:
    """MurmurHash3's 64-bit finalizer (runtime/tools/mix.hpp)."""
    k &= MASK64
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & MASK64
    k ^= k >> 33
    return k


def fnv1a(s: str) -> int:
    """FNV-1a over the UTF-8 bytes of `s` (runtime/tools/mix.hpp)."""
    h = 0xCBF29CE484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001B3) & MASK64
    return h


def _str_hash(s: str) -> int:
    return fmix64(fnv1a(s))


def _block_key(scope: int, block_id: int) -> int:
    return fmix64(scope ^ fmix64(block_id + GOLDEN))


@dataclasses.dataclass
class TraceRequest:
    """One request of a trace (runtime/tools/trace.hpp's trace_request)."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    blocks: List[int]  # prefix-chained 64-bit block keys
    ns: str  # weka: the request's model; "" otherwise
    session: str  # weka: the conversation; "" otherwise
    tail_seed: int


@dataclasses.dataclass
class Trace:
    name: str
    format: str  # "mooncake" or "weka"
    block_size: int
    requests: List[TraceRequest]

    def request_ns(self, r: TraceRequest) -> str:
        """The namespace `kvtier replay` gives the request's state."""
        return self.name + ("/" + r.ns if r.ns else "")


def _file_name(path: str) -> str:
    n = os.path.basename(path)
    return n[:-3] if n.endswith(".gz") else n


def _open_text(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


def _load_mooncake(path: str, lines, out: Trace) -> None:
    out.format, out.block_size = "mooncake", 512
    scope = _str_hash(_file_name(path))
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        j = json.loads(line)
        try:
            out.requests.append(TraceRequest(
                arrival_s=float(j["timestamp"]) / 1000.0,
                input_tokens=int(j["input_length"]),
                output_tokens=int(j["output_length"]),
                blocks=[_block_key(scope, int(b)) for b in j["hash_ids"]],
                ns="", session="",
                tail_seed=fmix64(scope + n)))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}:{n}: not a mooncake request: {e}") from e


def _add_weka(reqs, start: float, file_scope: int, session: str,
              out: Trace, keys: dict) -> None:
    # `keys` memoizes (scope, id) -> key: a conversation repeats its prefix
    # chain in every request, so most ids recur.
    for q in reqs:
        t = start + float(q["t"])
        if q.get("type", "") == "subagent":
            _add_weka(q["requests"], t, file_scope, session, out, keys)
            continue
        model = q.get("model", "")
        scope = fmix64(file_scope ^ _str_hash(model))
        blocks = []
        for b in q["hash_ids"]:
            k = keys.get((scope, b))
            if k is None:
                k = keys[(scope, b)] = _block_key(scope, int(b))
            blocks.append(k)
        out.requests.append(TraceRequest(
            arrival_s=t, input_tokens=int(q["in"]),
            output_tokens=int(q["out"]),
            blocks=blocks,
            ns=model, session=session,
            tail_seed=fmix64(file_scope + len(out.requests) * GOLDEN)))


def _load_weka(path: str, text: str, start: float, out: Trace) -> None:
    out.format = "weka"
    j = json.loads(text)
    bs = int(j["block_size"])
    if out.block_size and out.block_size != bs:
        raise ValueError(f"{path}: block size {bs} differs from "
                         f"{out.block_size}")
    out.block_size = bs
    ident = j.get("id", os.path.splitext(_file_name(path))[0])
    _add_weka(j["requests"], start, _str_hash(ident), ident, out, {})


def _load_file(path: str, start: float, out: Trace) -> None:
    with _open_text(path) as f:
        text = f.read()
    first = text.split("\n", 1)[0]
    if first.startswith("TIMESTAMP"):
        raise ValueError(f"{path}: azure traces share no prefixes; the "
                         "reference engine reads mooncake and weka traces")
    if '"timestamp"' in first:
        _load_mooncake(path, text.split("\n"), out)
    elif "{" in first:
        _load_weka(path, text, start, out)
    else:
        raise ValueError(f"{path}: unknown trace format")


def load_trace(path: str, max_requests: int = 0,
               files: Optional[List[str]] = None,
               conv_stagger_s: float = 0.0) -> Trace:
    """Loads a mooncake file or a weka file or directory, as `load_trace` in
    runtime/tools/trace.hpp does: requests in arrival order (stable), the
    first `max_requests` kept (0: all). `files` restricts a weka directory to
    those file names (e.g. ["trace_0012.json.gz"]), still merged in sorted
    order; the default reads every file, as `kvtier replay` does."""
    out = Trace(name=_file_name(os.path.normpath(path)), format="",
                block_size=0, requests=[])
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path)
                       if n.endswith(".json") or n.endswith(".json.gz"))
        if files is not None:
            names = [n for n in names if n in set(files)]
        if not names:
            raise ValueError(f"{path}: no .json or .json.gz trace")
        for i, n in enumerate(names):
            _load_file(os.path.join(path, n), conv_stagger_s * i, out)
    else:
        _load_file(path, 0.0, out)
    out.requests.sort(key=lambda r: r.arrival_s)  # stable, as std::stable_sort
    if max_requests > 0:
        del out.requests[max_requests:]
    return out


def scaled_length(tokens: int, block_size: int, tokens_per_block: int) -> int:
    """`tokens` of a trace whose blocks hold `block_size` tokens, in a prompt
    whose blocks hold `tokens_per_block` (rounded up)."""
    return math.ceil(tokens * tokens_per_block / block_size)


def prompt_tokens(r: TraceRequest, block_size: int,
                  tokens_per_block: Optional[int] = None,
                  max_prompt_tokens: int = 0, vocab: int = 32000) -> List[int]:
    """The request's prompt (runtime/tools/trace.cpp's prompt_tokens): its
    blocks expanded, then tokens seeded per request, cut to its input length.
    Scaled when `tokens_per_block` < `block_size` (see the module's doc), cut
    to `max_prompt_tokens` when that is > 0."""
    tpb = block_size if tokens_per_block is None else tokens_per_block
    if not 1 <= tpb <= block_size:
        raise ValueError(f"tokens_per_block {tpb} is not 1 .. {block_size}")
    # The trace's tokens per block (the C++ expansion), and the prompt's
    # length at that scale: blocks keep their first `tpb` tokens, a partial
    # last block and the uncovered tail scale by the same factor.
    covered = min(len(r.blocks) * block_size, r.input_tokens)
    full, part = divmod(covered, block_size)
    n_blocks_tokens = full * tpb + scaled_length(part, block_size, tpb)
    tail = scaled_length(r.input_tokens - covered, block_size, tpb)
    n = n_blocks_tokens + tail
    if max_prompt_tokens > 0:
        n = min(n, max_prompt_tokens)
    out: List[int] = []
    for key in r.blocks:
        for j in range(tpb):
            if len(out) >= min(n, n_blocks_tokens):
                break
            out.append(fmix64(key ^ (((j + 1) * GOLDEN) & MASK64)) % vocab)
    k = 0
    while len(out) < n:
        out.append(fmix64(r.tail_seed + (k + 1) * GOLDEN) % vocab)
        k += 1
    return out
