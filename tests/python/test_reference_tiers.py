"""The reference engine served from kvtier's SSD tier after a restart and
from a peer engine process (docs/python.md "The reference engine"): slices
of the conversation and WEKA traces, every logit checked. Engine processes
are bounded in time and talk on loopback only."""

from __future__ import annotations

import pytest

import reference_runs as runs


@pytest.mark.parametrize("name", ["conversation", "weka"])
def test_serves_a_trace_from_ssd_after_a_restart(name, tmp_path):
    first, second = runs.serve_after_restart(name, tmp_path)
    assert first["close"]["durable"], first["close"]
    runs.assert_checked(second, len(runs.requests_for(name)))
    assert second["check"]["reused_tokens"]["ssd"] > 0, second["check"]


@pytest.mark.parametrize("name", ["conversation", "weka"])
def test_serves_a_trace_from_a_peer_engine_process(name, tmp_path):
    a, b = runs.serve_from_peer(name, tmp_path)
    runs.assert_checked(b, len(runs.requests_for(name)))
    assert b["check"]["reused_tokens"]["peer"] > 0, b["check"]
