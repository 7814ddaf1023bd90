"""The reference engine's runs, shared by test_reference.py (the default
suite: a slice of each trace) and test_reference_soak.py (label soak: 200
requests of each): serving through kvtier in this process (RAM), after a
restart in a new process (SSD), and from a second engine process joined to
the first as a cluster (peer). Every run checks every request
(kvtier.reference.replay.check_run): logits bit-identical to the same engine
keeping its own K/V, greedy tokens equal to a prefill from scratch.

Engine processes are `python3 -m kvtier.reference` (its --help); each is
bounded in time, talks on loopback only, and is stopped by the test.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import torch

import kvtier
from kvtier.reference import (KvtierEngine, LocalEngine, ModelConfig,
                              ReferenceModel, check_run, engine_requests,
                              kvtier_model, load_trace)
from kvtier.reference.__main__ import model_arguments, model_positions
from kvtier.reference.replay import save_requests

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "tests/traces"
CONVERSATION = TRACES / "mooncake-fast25/conversation_trace.jsonl.gz"
WEKA = TRACES / "kv-cache-tester-weka"

# The test model: 2 layers x 64 wide, 4 heads, chunks of 64 tokens.
CONFIG = ModelConfig(layers=2, d_model=64, n_heads=4, d_ff=128, chunk=64)
CHECKPOINT_EVERY = 4
PROCESS_DEADLINE_S = 900  # one engine process, start to exit
PEER_DEADLINE_S = 120  # the peer up and its directory filled

# Which requests: (trace, weka files or None for all, count, tokens per
# block, prompt cut, decoded tokens).
SLICES = {
    # The first 40 conversation requests, 512-token blocks as 16 tokens.
    "conversation": (CONVERSATION, None, 40, 16, 1024, 8),
    # Two WEKA agent sessions (45 requests, the first 40), 64-token blocks
    # as 1 token: in the merged directory the first requests are the first
    # turns of 71 sessions, which share nothing.
    "weka": (WEKA, ["trace_0449.json.gz", "trace_0710.json.gz"], 40, 1, 2048,
             8),
    # Soak: the first 200 of each trace as `kvtier replay` orders them.
    "conversation-200": (CONVERSATION, None, 200, 32, 2048, 16),
    "weka-200": (WEKA, None, 200, 1, 2048, 16),
}

_cache = {}


def requests_for(name: str):
    if name not in _cache:
        path, files, count, tpb, cut, new = SLICES[name]
        t = load_trace(str(path), max_requests=count, files=files)
        _cache[name] = engine_requests(t, 0, count, tpb, cut, new)
    return _cache[name]


def model_for(reqs) -> ReferenceModel:
    longest = max(len(r.prompt) + r.max_new_tokens for r in reqs)
    return ReferenceModel(CONFIG, max_positions=model_positions(CONFIG,
                                                                longest))


def service_options(**more) -> dict:
    opts = {"ram-tier.cap-bytes": "1GiB",
            "service.checkpoint-every-tokens": CHECKPOINT_EVERY,
            "service.idle-demotion-ms": 0}
    opts.update(more)
    return opts


def serve_in_process(name: str):
    """Serves the slice through a service in this process (RAM)."""
    torch.set_num_threads(1)
    reqs = requests_for(name)
    model = model_for(reqs)
    with kvtier.Service(model=kvtier_model(CONFIG),
                        options=service_options()) as svc:
        engine = KvtierEngine(model, svc)  # the service's checkpoint period
        return check_run(engine, reqs, LocalEngine(model))


class EngineProcess:
    """`python3 -m kvtier.reference` on a requests file, stdout read line by
    line under deadlines, stderr to a file (shown when it fails)."""

    def __init__(self, tmp: Path, tag: str, reqs_file: Path, options: dict,
                 *flags: str):
        self.report = tmp / f"{tag}.json"
        self.log = tmp / f"{tag}.log"
        cmd = [sys.executable, "-m", "kvtier.reference", "--requests-file",
               str(reqs_file), "--report", str(self.report), "--quiet",
               "--checkpoint-every", str(CHECKPOINT_EVERY),
               *model_arguments(CONFIG),
               *flags]
        for k, v in options.items():
            if k != "service.checkpoint-every-tokens":
                cmd += ["--option", f"{k}={v}"]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, text=True, env=env)
        self.started = time.monotonic()

    def _left(self) -> float:
        return PROCESS_DEADLINE_S - (time.monotonic() - self.started)

    def line(self, prefix: str) -> str:
        """The next stdout line starting with `prefix` (its rest)."""
        while True:
            left = self._left()
            if left <= 0:
                self.kill()
                raise AssertionError(f"no '{prefix}' line in time: "
                                     f"{self.log.read_text()[-3000:]}")
            ready, _, _ = select.select([self.proc.stdout], [], [],
                                        min(left, 5))
            if not ready:
                continue
            text = self.proc.stdout.readline()
            if not text:
                raise AssertionError(f"exited ({self.proc.wait()}) before "
                                     f"'{prefix}': "
                                     f"{self.log.read_text()[-3000:]}")
            if text.startswith(prefix):
                return text[len(prefix):].strip()

    def stop(self) -> None:
        """Ends a --hold process: a line on its stdin, then its exit within
        a minute, else it is killed."""
        if self.proc.poll() is None:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()

    def result(self) -> dict:
        """Waits for the exit (bounded) and returns the report."""
        try:
            self.proc.wait(timeout=max(self._left(), 1))
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running after {PROCESS_DEADLINE_S} "
                                 f"s: {self.log.read_text()[-3000:]}")
        assert self.report.exists(), self.log.read_text()[-3000:]
        return json.loads(self.report.read_text())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def write_requests(tmp: Path, name: str) -> Path:
    path = tmp / f"{name}.requests.json"
    save_requests(str(path), requests_for(name))
    return path


def serve_after_restart(name: str, tmp: Path):
    """A first engine process serves the slice and closes (its state flushed
    to SSD); a second one, started on the same SSD directory, serves the
    slice again, checked. Returns (first report, second report)."""
    reqs_file = write_requests(tmp, name)
    opts = service_options(**{"ssd-tier.dir": str(tmp / "ssd")})
    first = EngineProcess(tmp, "first", reqs_file, opts, "--close",
                          "--no-baseline", "--no-whole")
    a = first.result()
    second = EngineProcess(tmp, "second", reqs_file, opts)
    return a, second.result()


def serve_from_peer(name: str, tmp: Path):
    """Engine process A serves the slice and stays up; B, joined to A as a
    cluster (loopback), waits until A is up in its peer directory and serves
    the slice again, checked. Returns (A's report, B's report)."""
    reqs_file = write_requests(tmp, name)
    node = {"cluster.enabled": "true", "cluster.port": 0,
            "cluster.listen-address": "127.0.0.1"}
    a = EngineProcess(tmp, "a", reqs_file, service_options(**node), "--ready",
                      "--hold", "--no-baseline", "--no-whole")
    try:
        addr = a.line("ready ")
        a.line("served")
        a_rep = json.loads(a.report.read_text())
        entries = a_rep["service"]["ram"]["entries"]
        b = EngineProcess(
            tmp, "b", reqs_file,
            service_options(**node, **{"cluster.peers": f'["{addr}"]'}),
            "--wait-peers", "1", "--wait-peer-entries", str(entries),
            "--wait-s", str(PEER_DEADLINE_S))
        b_rep = b.result()
    finally:
        a.stop()
    assert a.proc.returncode == 0, a.log.read_text()[-3000:]
    return a_rep, b_rep


def assert_checked(rep: dict, requests: int) -> None:
    """Every request served and checked, nothing mismatched."""
    c = rep["check"] if "check" in rep else rep
    assert c["requests"] == requests
    assert c["exact_checked"] == requests - c["refused"], c
    assert c["whole_checked"] == requests - c["refused"], c
    assert c["exact_mismatches"] == [], c
    assert c["greedy_mismatches"] == [], c
    assert c["tolerance_mismatches"] == [], c
    assert c["ok"]


def main(names) -> int:
    """Runs the three runs of each named slice and prints their figures
    (what the docs quote): `PYTHONPATH=build/python /usr/bin/python3
    tests/python/reference_runs.py conversation weka`."""
    import tempfile

    ok = True
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            ram = serve_in_process(name).to_json()
            for sub in ("restart", "peer"):
                (Path(tmp) / sub).mkdir()
            _, ssd = serve_after_restart(name, Path(tmp) / "restart")
            _, peer = serve_from_peer(name, Path(tmp) / "peer")
        for tier, rep in (("ram", ram), ("ssd", ssd["check"]),
                          ("peer", peer["check"])):
            ok &= rep["ok"]
            r = rep["reused_tokens"]
            exact = rep["exact_checked"] - len(rep["exact_mismatches"])
            greedy = rep["whole_checked"] - len(rep["greedy_mismatches"])
            print(f"{name:>16} {tier:>4}: {rep['requests']} requests, "
                  f"{rep['input_tokens']} prompt tokens, reused ram "
                  f"{r['ram']} ssd {r['ssd']} peer {r['peer']}; "
                  f"bit-identical {exact}/{rep['exact_checked']}, greedy "
                  f"equal {greedy}/{rep['whole_checked']}, largest logit "
                  f"difference {rep['max_whole_logit_diff']:.3g}",
                  flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["conversation", "weka"]))
