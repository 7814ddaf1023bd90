"""kvtier's reference engine: a small decoder-only transformer on real
tensors (PyTorch, CPU, fp32, seeded weights) that serves the repository's
traces through kvtier and checks every answer (docs/python.md, "The
reference engine").

- `trace`: the traces' requests as token prompts (the C++ reader's mapping,
  scaled down in tokens per block where asked);
- `model`: the transformer and its K/V cache (kvtier's token-major layout);
- `engine`: `KvtierEngine` (the replay engine's order of calls) and
  `LocalEngine` (the same engine keeping its K/V in its own memory);
- `replay`: serving a slice of a trace with both and comparing them;
- `python3 -m kvtier.reference --help`: the same from the command line.

Needs torch (Debian's python3-torch); `import kvtier` does not import this.
"""

from .engine import EngineRequest, KvtierEngine, LocalEngine, Served
from .model import LOGIT_ATOL, KVCache, ModelConfig, ReferenceModel
from .replay import CheckReport, check_run, engine_requests
from .trace import Trace, load_trace, prompt_tokens


def kvtier_model(cfg: ModelConfig):
    """The `kvtier.Model` of the reference transformer: per transformer
    layer two kv layers, K then V, each row (n_heads, head_dim) float32."""
    import kvtier

    layers = []
    for _ in range(cfg.layers):
        for _kv in ("k", "v"):
            layers.append(kvtier.Layer.kv(shape=(cfg.n_heads, cfg.head_dim),
                                          dtype="float32"))
    return kvtier.Model(identity=cfg.identity, layers=layers)


__all__ = ["CheckReport", "EngineRequest", "KVCache", "KvtierEngine",
           "LOGIT_ATOL", "LocalEngine", "ModelConfig", "ReferenceModel",
           "Served", "Trace", "check_run", "engine_requests", "kvtier_model",
           "load_trace", "prompt_tokens"]
