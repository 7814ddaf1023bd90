"""The reference engine's long runs (CTest label soak, `make soak`): the
first 200 requests of the conversation trace and of the merged WEKA traces,
served through kvtier from RAM, from SSD after a restart and from a peer
engine process, every logit checked (see test_reference.py for the short
version in the default suite)."""

from __future__ import annotations

import pytest

import reference_runs as runs

SOAK = ["conversation-200", "weka-200"]


@pytest.mark.parametrize("name", SOAK)
def test_serves_200_requests_from_ram_bit_identical(name):
    rep = runs.serve_in_process(name)
    runs.assert_checked(rep.to_json(), 200)
    assert rep.reused_tokens["ram"] > 0


@pytest.mark.parametrize("name", SOAK)
def test_serves_200_requests_from_ssd_after_a_restart(name, tmp_path):
    first, second = runs.serve_after_restart(name, tmp_path)
    assert first["close"]["durable"], first["close"]
    runs.assert_checked(second, 200)
    assert second["check"]["reused_tokens"]["ssd"] > 0


@pytest.mark.parametrize("name", SOAK)
def test_serves_200_requests_from_a_peer_engine_process(name, tmp_path):
    _, b = runs.serve_from_peer(name, tmp_path)
    runs.assert_checked(b, 200)
    assert b["check"]["reused_tokens"]["peer"] > 0
