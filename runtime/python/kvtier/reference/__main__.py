"""`python3 -m kvtier.reference`: serve a slice of a trace with the reference
engine through kvtier and check every answer (docs/python.md, "The reference
engine"). Prints the summary; `--report FILE` writes it as JSON.

Also the engine process of the restart and cluster tests: `--ready` prints
"ready HOST:PORT" (the node's address, "-" without a cluster) once the
service is up, `--hold` then waits, after serving, for a line on stdin
before it closes (at most `--hold-s` seconds), `--close` closes the service
(flushing it to SSD) and adds the durability evidence to the report.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import time

from .model import ModelConfig


def _option(text: str):
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--option {text!r}: want KEY=VALUE")
    return key, value


def _args(argv):
    p = argparse.ArgumentParser(prog="python3 -m kvtier.reference",
                                description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", help="a mooncake file or a weka file or "
                     "directory (tests/traces/...)")
    src.add_argument("--requests-file", help="engine requests as JSON "
                     "(kvtier.reference.replay.save_requests)")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--tokens-per-block", type=int, default=None,
                   help="tokens a trace block stands for (default: the "
                   "trace's block size)")
    p.add_argument("--max-prompt-tokens", type=int, default=2048)
    p.add_argument("--max-new-tokens", type=int, default=16)
    add_model_arguments(p, ModelConfig(), threads=1)
    p.add_argument("--option", type=_option, action="append", default=[],
                   help="a service option SECTION.KEY=VALUE (repeatable)")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="service.checkpoint-every-tokens")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--no-baseline", action="store_true",
                   help="skip the bit-identical comparison")
    p.add_argument("--no-whole", action="store_true",
                   help="skip the comparison with a prefill from scratch")
    p.add_argument("--report", help="write the report as JSON here")
    p.add_argument("--ready", action="store_true",
                   help='print "ready ADDRESS" once the service is up')
    p.add_argument("--wait-peers", type=int, default=0,
                   help="before serving, wait until this many peers are up")
    p.add_argument("--wait-peer-entries", type=int, default=0,
                   help="... and the peer directory knows this many entries")
    p.add_argument("--wait-s", type=float, default=120.0)
    p.add_argument("--hold", action="store_true",
                   help="after serving, wait for a line on stdin")
    p.add_argument("--hold-s", type=float, default=900.0)
    p.add_argument("--close", action="store_true",
                   help="close the service at the end (flush to SSD)")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def add_model_arguments(p: argparse.ArgumentParser, cfg: ModelConfig,
                        threads: int) -> None:
    """The model's options (--layers, --d-model, --heads, --d-ff, --chunk,
    --seed), defaulting to `cfg`, and --threads (torch.set_num_threads)."""
    p.add_argument("--layers", type=int, default=cfg.layers)
    p.add_argument("--d-model", type=int, default=cfg.d_model)
    p.add_argument("--heads", type=int, default=cfg.n_heads)
    p.add_argument("--d-ff", type=int, default=cfg.d_ff)
    p.add_argument("--chunk", type=int, default=cfg.chunk)
    p.add_argument("--seed", type=int, default=cfg.seed)
    p.add_argument("--threads", type=int, default=threads,
                   help="torch.set_num_threads")


def config_from_arguments(a) -> ModelConfig:
    return ModelConfig(layers=a.layers, d_model=a.d_model, n_heads=a.heads,
                       d_ff=a.d_ff, chunk=a.chunk, seed=a.seed)


def model_arguments(cfg: ModelConfig) -> list:
    """The command line options that give a process the model `cfg`."""
    return ["--layers", str(cfg.layers), "--d-model", str(cfg.d_model),
            "--heads", str(cfg.n_heads), "--d-ff", str(cfg.d_ff), "--chunk",
            str(cfg.chunk), "--seed", str(cfg.seed)]


def main(argv=None) -> int:
    a = _args(sys.argv[1:] if argv is None else argv)
    import torch

    import kvtier

    from . import kvtier_model
    from .engine import KvtierEngine, LocalEngine
    from .model import ReferenceModel
    from .replay import check_run, engine_requests, load_requests
    from .trace import load_trace

    torch.set_num_threads(a.threads)
    if a.trace:
        t = load_trace(a.trace, max_requests=a.start + a.count
                       if a.count > 0 else 0)
        reqs = engine_requests(t, a.start, a.count, a.tokens_per_block,
                               a.max_prompt_tokens, a.max_new_tokens)
    else:
        reqs = load_requests(a.requests_file)
    cfg = config_from_arguments(a)
    longest = max((len(r.prompt) + r.max_new_tokens for r in reqs),
                  default=1)
    model = ReferenceModel(cfg, max_positions=model_positions(cfg, longest))
    options = dict(a.option)
    options["service.checkpoint-every-tokens"] = a.checkpoint_every
    svc = kvtier.Service(model=kvtier_model(cfg), options=options)
    out = {"model": cfg.identity}
    try:
        addr = svc.node_address
        if a.ready:
            print(f"ready {addr or '-'}", flush=True)
        if a.wait_peers or a.wait_peer_entries:
            out["peer_wait_s"] = wait_for_peers(svc, a.wait_peers,
                                                a.wait_peer_entries, a.wait_s)
        engine = KvtierEngine(model, svc, batch=a.batch)
        baseline = None if a.no_baseline else LocalEngine(model)

        def progress(i, rep):
            if not a.quiet and (i + 1) % 25 == 0:
                print(f"{i + 1}/{len(reqs)}: {rep.summary()}",
                      file=sys.stderr, flush=True)

        rep = check_run(engine, reqs, baseline, whole=not a.no_whole,
                        progress=progress)
        out["check"] = rep.to_json()
        out["service"] = svc.report()
        if not a.quiet:
            print(rep.summary(), flush=True)
        if a.report:
            _write(a.report, out)
        if a.hold:
            print("served", flush=True)
            select.select([sys.stdin], [], [], a.hold_s)
        if a.close:
            out["close"] = svc.close()
            if a.report:
                _write(a.report, out)
    finally:
        svc.close()
    return 0 if out.get("check", {}).get("ok") else 1


def model_positions(cfg, longest: int) -> int:
    """Rotary table rows: every position a request reaches, chunk-rounded."""
    return (longest + cfg.chunk - 1) // cfg.chunk * cfg.chunk + cfg.chunk


def wait_for_peers(svc, peers: int, entries: int, deadline_s: float) -> float:
    """Polls the service's report until `peers` peers are up and its peer
    directory knows `entries` entries; returns the seconds waited."""
    t0 = time.monotonic()
    while True:
        p = svc.report().get("peer", {})
        if p.get("peers_up", 0) >= peers and \
                p.get("directory_entries", p.get("entries", 0)) >= entries:
            return time.monotonic() - t0
        if time.monotonic() - t0 > deadline_s:
            raise TimeoutError(f"peers not up after {deadline_s} s: {p}")
        time.sleep(0.05)


def _write(path: str, out: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1, default=str)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
