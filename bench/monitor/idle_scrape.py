#!/usr/bin/env python3
"""Times /metrics scrapes of a running `rtlab monitor` while IDLE connections sit open on it.

    python3 bench/monitor/idle_scrape.py [--address 127.0.0.1:9464] [--idle 200] [--scrapes 50]

Opens IDLE TCP connections that never send a byte, then scrapes /metrics SCRAPES times (each a
new connection, as Prometheus does after the monitor's Connection: close), and prints one JSON
line: the scrape times' median, p90 and max in milliseconds, and how many scrapes failed.
"""

import argparse
import http.client
import json
import socket
import statistics
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="127.0.0.1:9464")
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--scrapes", type=int, default=50)
    args = parser.parse_args()
    host, port = args.address.rsplit(":", 1)
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(args.idle)]
    time.sleep(0.5)
    times_ms, failed = [], 0
    for _ in range(args.scrapes):
        started = time.monotonic()
        try:
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            connection.request("GET", "/metrics")
            response = connection.getresponse()
            body = response.read()
            if response.status != 200 or b"# EOF" not in body:
                failed += 1
            connection.close()
        except OSError:
            failed += 1
        times_ms.append((time.monotonic() - started) * 1000)
    times_ms.sort()
    print(json.dumps({
        "idle_connections": args.idle,
        "scrapes": args.scrapes,
        "failed": failed,
        "median_ms": round(statistics.median(times_ms), 2),
        "p90_ms": round(times_ms[int(len(times_ms) * 0.9) - 1], 2),
        "max_ms": round(times_ms[-1], 2),
    }))
    for connection in idle:
        connection.close()


if __name__ == "__main__":
    main()
