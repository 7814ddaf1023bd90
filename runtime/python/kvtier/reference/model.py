"""The reference transformer: a small decoder-only model on real tensors.

A Llama-shaped decoder (pre-norm RMSNorm, rotary positions, multi-head causal
attention, a SiLU-gated MLP, tied nothing) in PyTorch on the CPU, fp32, with
weights drawn from a seeded generator: the same `ModelConfig` gives the same
weights in every process. Its state per layer is a real K/V cache, token-major
(row i holds token i's keys, shape (n_heads, head_dim)), which is exactly
kvtier's `kv` layer layout: one transformer layer is two kvtier layers, K then
V (`kvtier_layers`).

Chunked prefill is *position-aligned*: the tokens of a prompt are computed in
chunks [a, a + chunk) with a a multiple of `chunk`, every chunk padded to
`chunk` rows, each query attending over the keys [0, a + chunk) with a causal
mask. So the arithmetic that produces token i's K/V and logits always has the
same shapes whatever came before (where a reused prefix ended, how long the
prompt is), and BLAS rounds it the same way: a token's K/V is a function of
the token prefix alone. (Measured here: OpenBLAS's sgemm gives a row different
bits when the same row sits in a matrix of another height, by up to 3e-5, so
without the alignment the K/V would depend on the chunking.) That is what lets
an engine reusing K/V from kvtier be compared bit for bit with the same engine
keeping its K/V in its own memory, and with a prefill from scratch in the same
chunks. `prefill_whole` is the other arithmetic, the whole prompt as one
matrix with plain causal attention over exactly its tokens: it rounds
differently, so it is compared within a tolerance (`LOGIT_ATOL`).

Decoding feeds one token at a time (attention over the cache rows so far).

Not thread-safe: one model per engine; weights are read-only after __init__.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

import torch

# Largest |difference| allowed between a logit of the chunked prefill and the
# same logit of `prefill_whole` (different matrix shapes, different rounding).
# Logits have a standard deviation of about 1 by construction (the head's
# init); the largest difference measured over the tests' runs was 2.4e-6
# (docs/python.md), so this is a bound with room, not a fit.
LOGIT_ATOL = 1e-3

# Query rows per attention step in `prefill_whole` (bounds its score matrix).
WHOLE_ATTENTION_ROWS = 384


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    layers: int = 2
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    vocab: int = 32000
    chunk: int = 64
    rope_base: float = 10000.0
    seed: int = 7

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def identity(self) -> str:
        """The model identity kvtier keys stored state with."""
        return (f"refengine-v1 L={self.layers} d={self.d_model} "
                f"h={self.n_heads} ff={self.d_ff} vocab={self.vocab} "
                f"chunk={self.chunk} fp32 seed={self.seed}")

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.d_model * 4


def _rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


class KVCache:
    """One request's K/V: per layer a (capacity, n_heads, head_dim) fp32
    buffer for K and one for V, rows [0, length) valid. Rows past `length`
    are zero or scratch, never attended (masked or outside the slice)."""

    def __init__(self, cfg: ModelConfig, capacity: int):
        shape = (capacity, cfg.n_heads, cfg.head_dim)
        self.k = [torch.zeros(shape) for _ in range(cfg.layers)]
        self.v = [torch.zeros(shape) for _ in range(cfg.layers)]
        self.length = 0
        # Rows [0, p) lent by kvtier: per kvtier layer its segments, and p.
        self.lent: Tuple[List[list], int] = ([], 0)

    @property
    def capacity(self) -> int:
        return self.k[0].shape[0]

    def reserve(self, capacity: int) -> None:
        """Grows the buffers to `capacity` rows (new buffers, rows copied:
        views handed out before keep the old buffers alive unchanged)."""
        if capacity <= self.capacity:
            return
        for bufs in (self.k, self.v):
            for i, b in enumerate(bufs):
                grown = torch.zeros((capacity,) + tuple(b.shape[1:]))
                grown[:self.length] = b[:self.length]
                bufs[i] = grown

    def load_prefix(self, layers: Sequence[torch.Tensor], rows: int) -> None:
        """Copies `rows` rows of K/V given as 2 x layers arrays (K0, V0, K1,
        V1, ...: kvtier's layer order) into the buffers."""
        for i in range(len(self.k)):
            self.k[i][:rows].copy_(torch.as_tensor(layers[2 * i])[:rows])
            self.v[i][:rows].copy_(torch.as_tensor(layers[2 * i + 1])[:rows])
        self.length = rows

    def rows(self, start: int, end: int) -> List[torch.Tensor]:
        """Rows [start, end) of every kvtier layer (K0, V0, K1, ...), views
        into the buffers (C-contiguous: whole rows)."""
        out = []
        for k, v in zip(self.k, self.v):
            out += [k[start:end], v[start:end]]
        return out


class ReferenceModel:
    """The transformer's weights and its forward passes."""

    def __init__(self, cfg: ModelConfig, max_positions: int = 1 << 16):
        if cfg.d_model % cfg.n_heads or cfg.head_dim % 2:
            raise ValueError("d_model must split into heads of even size")
        self.cfg = cfg
        g = torch.Generator().manual_seed(cfg.seed)
        d, ff = cfg.d_model, cfg.d_ff

        def w(*shape, scale):
            return torch.randn(*shape, generator=g) * scale

        self.embed = w(cfg.vocab, d, scale=1.0)
        self.blocks = []
        for _ in range(cfg.layers):
            self.blocks.append(dict(
                attn_norm=torch.ones(d), mlp_norm=torch.ones(d),
                wqkv=w(3 * d, d, scale=d ** -0.5),
                wo=w(d, d, scale=d ** -0.5 / math.sqrt(2 * cfg.layers)),
                w_gate=w(ff, d, scale=d ** -0.5),
                w_up=w(ff, d, scale=d ** -0.5),
                w_down=w(d, ff, scale=ff ** -0.5 / math.sqrt(2 * cfg.layers))))
        self.final_norm = torch.ones(d)
        self.head = w(cfg.vocab, d, scale=d ** -0.5)
        half = cfg.head_dim // 2
        inv = cfg.rope_base ** (
            -torch.arange(half, dtype=torch.float64) / half)
        ang = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv
        self.cos = torch.cos(ang).float()  # (positions, half)
        self.sin = torch.sin(ang).float()

    # -- pieces -----------------------------------------------------------

    def _rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        # x: (rows, heads, head_dim); rotate the two halves.
        half = x.shape[-1] // 2
        c = self.cos[pos][:, None, :]
        s = self.sin[pos][:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)

    def _layer(self, i: int, x: torch.Tensor, pos: torch.Tensor,
               cache: KVCache, write: slice, keys: int,
               mask: Optional[torch.Tensor],
               rows_per_step: Optional[int] = None) -> torch.Tensor:
        """One block over rows `x` at positions `pos`: their K/V rows
        `write` (a slice of the rows, absolute positions pos[write]) go into
        the cache, then the rows attend over cache rows [0, keys) (with
        `rows_per_step`: each block of that many rows over the keys up to
        its own last position)."""
        cfg, b = self.cfg, self.blocks[i]
        h, hd = cfg.n_heads, cfg.head_dim
        qkv = torch.nn.functional.linear(_rms_norm(x, b["attn_norm"]),
                                         b["wqkv"])
        q, k, v = qkv.view(x.shape[0], 3, h, hd).unbind(1)
        q, k = self._rope(q, pos), self._rope(k, pos)
        lo, hi = int(pos[write][0]), int(pos[write][-1]) + 1
        cache.k[i][lo:hi] = k[write]
        cache.v[i][lo:hi] = v[write]
        kk = cache.k[i][:keys].transpose(0, 1)  # (heads, keys, hd)
        vv = cache.v[i][:keys].transpose(0, 1)
        qh = q.transpose(0, 1) * (hd ** -0.5)  # (heads, rows, hd)
        att = torch.empty_like(qh)
        # Queries in blocks of `rows_per_step` (the whole chunk in the
        # chunked passes), each over the keys up to its last row.
        step = rows_per_step or x.shape[0]
        for r0 in range(0, x.shape[0], step):
            r1 = min(r0 + step, x.shape[0])
            kend = keys if rows_per_step is None else int(pos[r1 - 1]) + 1
            scores = qh[:, r0:r1] @ kk[:, :kend].transpose(1, 2)
            if mask is not None:
                scores = scores.masked_fill(mask[r0:r1, :kend],
                                            float("-inf"))
            att[:, r0:r1] = torch.softmax(scores, dim=-1) @ vv[:, :kend]
        x = x + torch.nn.functional.linear(
            att.transpose(0, 1).reshape(x.shape[0], -1), b["wo"])
        y = _rms_norm(x, b["mlp_norm"])
        gate = torch.nn.functional.silu(
            torch.nn.functional.linear(y, b["w_gate"]))
        up = torch.nn.functional.linear(y, b["w_up"])
        return x + torch.nn.functional.linear(gate * up, b["w_down"])

    def _logits(self, x_row: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(
            _rms_norm(x_row, self.final_norm), self.head)

    # -- the passes an engine calls ---------------------------------------

    def capacity_for(self, tokens: int) -> int:
        """Cache rows a request of `tokens` positions (prompt + decode)
        needs: chunks are computed whole, so round up to a chunk."""
        c = self.cfg.chunk
        return (tokens + c - 1) // c * c

    @torch.no_grad()
    def prefill(self, tokens: Sequence[int], cache: KVCache) -> torch.Tensor:
        """Computes tokens[cache.length:] on top of the cache's rows [0,
        cache.length) in position-aligned chunks; returns the logits of the
        last token (vocab,). The cache then holds len(tokens) rows."""
        n, start, c = len(tokens), cache.length, self.cfg.chunk
        if not 0 <= start < n:
            raise ValueError(f"prefill of {n} tokens on {start} cached: "
                             "at least one token must be computed")
        if cache.capacity < self.capacity_for(n):
            raise ValueError(f"cache of {cache.capacity} rows is short of "
                             f"{self.capacity_for(n)}")
        ids = torch.as_tensor(list(tokens), dtype=torch.long)
        a = start // c * c
        x_last = None
        while a < n:
            end = a + c
            rows = torch.zeros(c, dtype=torch.long)  # padding: token 0
            real = ids[a:min(end, n)]
            rows[:real.numel()] = real
            pos = torch.arange(a, end)
            write = slice(max(start, a) - a, min(end, n) - a)
            mask = torch.arange(end)[None, :] > pos[:, None]
            x = self.embed[rows]
            for i in range(self.cfg.layers):
                x = self._layer(i, x, pos, cache, write, end, mask)
            if end >= n:
                x_last = x[n - 1 - a:n - a]
            a = end
        cache.length = n
        return self._logits(x_last)[0]

    @torch.no_grad()
    def decode(self, token: int, cache: KVCache) -> torch.Tensor:
        """Feeds one token at position cache.length; returns its logits."""
        t = cache.length
        if t >= cache.capacity:
            raise ValueError(f"cache of {cache.capacity} rows is full")
        x = self.embed[torch.tensor([token])]
        pos = torch.tensor([t])
        for i in range(self.cfg.layers):
            x = self._layer(i, x, pos, cache, slice(0, 1), t + 1, None)
        cache.length = t + 1
        return self._logits(x)[0]

    @torch.no_grad()
    def prefill_whole(self, tokens: Sequence[int], extra_rows: int = 0
                      ) -> Tuple[torch.Tensor, KVCache]:
        """A prefill from scratch in other arithmetic: every projection and
        MLP over the whole prompt as one matrix, attention over exactly the
        causal keys (no chunk alignment, no padding; queries taken
        `WHOLE_ATTENTION_ROWS` at a time only to bound the score matrix's
        memory). Returns the last token's logits and a cache with room for
        `extra_rows` decoded tokens."""
        n = len(tokens)
        cache = KVCache(self.cfg, n + extra_rows)
        pos = torch.arange(n)
        mask = pos[None, :] > pos[:, None]
        x = self.embed[torch.as_tensor(list(tokens), dtype=torch.long)]
        for i in range(self.cfg.layers):
            x = self._layer(i, x, pos, cache, slice(0, n), n, mask,
                            rows_per_step=WHOLE_ATTENTION_ROWS)
        cache.length = n
        return self._logits(x[n - 1:n])[0], cache
