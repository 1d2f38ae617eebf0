#!/usr/bin/env python3
"""Slow clients against a running `switchboard serve`, with `/healthz` timed meanwhile.

Opens CONNECTIONS connections that each send one byte of a request head every INTERVAL
seconds (and never finish it), then asks for /healthz once a second on a fresh connection
for DURATION seconds. Prints the /healthz latencies (median, p90, max, failures) and how many
slow connections the server closed, and how long after their opening.

    scripts/slow-clients.py http://127.0.0.1:8080 [--connections 300] [--interval 5] [--duration 30]

Loopback only: it refuses any other host. Uses nothing beyond the standard library.
"""

import argparse
import asyncio
import statistics
import time
import urllib.parse

HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4096


async def slow_client(host, port, interval, until, closed_after, opened):
    started = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
    except (OSError, asyncio.TimeoutError):
        return
    opened.append(started)
    sent = 0
    try:
        while time.monotonic() < until and sent < len(HEAD):
            writer.write(HEAD[sent : sent + 1])
            sent += 1
            await writer.drain()
            try:
                # Anything the server sends (a 503, or the end of the stream) ends the client.
                await asyncio.wait_for(reader.read(1024), interval)
                closed_after.append(time.monotonic() - started)
                return
            except asyncio.TimeoutError:
                pass
    except (ConnectionError, OSError):
        closed_after.append(time.monotonic() - started)
    finally:
        writer.close()


async def healthz(host, port):
    started = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        ok = status.startswith(b"HTTP/1.1 200")
        return time.monotonic() - started, ok, status.decode(errors="replace").strip()
    except (OSError, asyncio.TimeoutError) as e:
        return time.monotonic() - started, False, type(e).__name__


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] if values else float("nan")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--duration", type=float, default=30.0)
    args = parser.parse_args()
    url = urllib.parse.urlparse(args.base)
    if url.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("loopback only")
    host, port = url.hostname, url.port or 80
    until = time.monotonic() + args.duration
    closed_after, opened = [], []
    slow = [
        asyncio.create_task(slow_client(host, port, args.interval, until, closed_after, opened))
        for _ in range(args.connections)
    ]
    await asyncio.sleep(1)
    checks = []
    while time.monotonic() < until:
        checks.append(await healthz(host, port))
        await asyncio.sleep(max(0.0, 1.0 - checks[-1][0]))
    await asyncio.gather(*slow)
    latencies = [c[0] * 1000 for c in checks if c[1]]
    failures = [c[2] for c in checks if not c[1]]
    print(f"slow connections: {args.connections} asked, {len(opened)} opened, "
          f"{len(closed_after)} closed by the server within {args.duration:.0f} s")
    if closed_after:
        print(f"  closed after: median {statistics.median(closed_after):.1f} s, "
              f"max {max(closed_after):.1f} s")
    print(f"/healthz: {len(checks)} asked, {len(latencies)} answered 200, {len(failures)} failed")
    if latencies:
        print(f"  latency ms: median {statistics.median(latencies):.1f}, "
              f"p90 {percentile(latencies, 0.9):.1f}, max {max(latencies):.1f}")
    if failures:
        print(f"  failures: {sorted(set(failures))}")


if __name__ == "__main__":
    asyncio.run(main())
