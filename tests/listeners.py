"""Which addresses a set of processes listens on, read from /proc (Linux): for the tests that
show a server of this tool opens nothing off loopback."""

from __future__ import annotations

import os
import socket
from pathlib import Path

_LISTEN = "0A"


def _address(hex_addr: str, family: int) -> str:
    raw = bytes.fromhex(hex_addr)
    if family == socket.AF_INET:
        return socket.inet_ntop(family, raw[::-1])
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]  # four host-order words
    return socket.inet_ntop(family, b"".join(words))


def _sockets() -> dict[str, tuple[str, int]]:
    """Inode -> (address, port) of every listening TCP socket in this network namespace."""
    out = {}
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        path = Path("/proc/net") / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == _LISTEN:
                addr, port = local.split(":")
                out[inode] = (_address(addr, family), int(port, 16))
    return out


def descendants(pid: int) -> set[int]:
    """The process and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    seen, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += children.get(p, [])
    return seen


def listening(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket these processes listen on."""
    sockets, found = _sockets(), set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and (inode := target[8:-1]) in sockets:
                found.add(sockets[inode])
    return found


def off_loopback(addresses: set[tuple[str, int]]) -> set[tuple[str, int]]:
    loopback = ("127.", "::ffff:127.")
    return {(a, p) for a, p in addresses if not (a.startswith(loopback) or a == "::1")}
