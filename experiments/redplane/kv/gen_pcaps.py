#!/usr/bin/env python3
"""Writes the KV request captures of kv-update-ratio.toml (spec §8 item 6).

warmup.pcap: one read of each of the 64 keys, 20 µs apart, so that every
key's lease is held before the load starts (the load's first packets would
otherwise each ask the store for it).

u00.pcap … u10.pcap: 1000 UDP requests each from s11 (10.1.0.1) to
203.0.113.1:5000 (the RedPlane KV app answers at the switch, reflecting the
request), 50 ns apart (20 M requests/s when replayed at its timing), over 64
keys chosen uniformly; each request is an update with probability u/10, else
a read. Body: op (1 B: 0 read, 1 update), key (4 B), value (4 B); frames are
padded to 60 B. Deterministic (fixed seed), standard library only:

    python3 experiments/redplane/kv/gen_pcaps.py
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SRC, DST = bytes([10, 1, 0, 1]), bytes([203, 0, 113, 1])
FRAMES, GAP_NS, KEYS = 1000, 50, 64


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(op: int, key: int, value: int, sport: int) -> bytes:
    body = struct.pack("!BII", op, key, value)
    udp = struct.pack("!HHHH", sport, 5000, 8 + len(body), 0) + body
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, SRC, DST)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    eth = bytes([0x02, 0, 0, 0, 0, 0xFE, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00])
    f = eth + ip + udp
    return f + b"\0" * max(0, 60 - len(f))


def write_frames(path: str, frames) -> None:
    """frames: (time ns, bytes) in order."""
    with open(path, "wb") as out:
        # pcap, nanosecond timestamps, Ethernet.
        out.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for t, f in frames:
            out.write(struct.pack("<IIII", t // 10**9, t % 10**9, len(f), len(f)))
            out.write(f)


def write(path: str, u: float, seed: int) -> None:
    rng = random.Random(seed)
    frames = []
    for i in range(FRAMES):
        key = rng.randrange(KEYS)
        op = 1 if rng.random() < u else 0
        frames.append((i * GAP_NS, frame(op, key, rng.randrange(1 << 32), 30000 + key)))
    write_frames(path, frames)


if __name__ == "__main__":
    write_frames(
        os.path.join(HERE, "warmup.pcap"),
        [(k * 20_000, frame(0, k, 0, 30000 + k)) for k in range(KEYS)],
    )
    for tenth in range(11):
        write(os.path.join(HERE, f"u{tenth:02d}.pcap"), tenth / 10, seed=tenth + 1)
