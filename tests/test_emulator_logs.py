"""The emulator is a test double that may serve a long soak: its logs stay bounded (issue 31,
item 9)."""

from __future__ import annotations


def test_the_emulators_logs_keep_the_newest_entries_only(monkeypatch):
    from orchestrator.emulator import server as emulator_server

    monkeypatch.setattr(emulator_server, "LOG_LIMIT", 100)
    log = emulator_server.Log()
    for i in range(1_000):
        log.bodies.append({"i": i})
        log.arrivals.append((float(i), "openai", "m"))
    assert 90 <= len(log.bodies) <= 100 and log.bodies[-1] == {"i": 999}
    assert len(log.arrivals) <= 100 and log.arrivals[-1][0] == 999.0
