"""The test fleet as exporters: live exposition for Prometheus to scrape, or its history.

    python -m tests.integration.sim_exporter --now EPOCH --port P       # serve /metrics
    python -m tests.integration.sim_exporter --now EPOCH --history F    # write OpenMetrics, exit

Both build the fleet of prom_scenario.make_fleet from the same ``--now``, so the scrape picks up
exactly where the backfilled history ends. /metrics is the fleet at the wall-clock instant of
the request: counters keep counting and faults stay on, as on a real cluster. The series carry
their own ``instance`` and ``job`` labels, so Prometheus must scrape with ``honor_labels``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer

from bot.backends.sim.fleet import SimFleet
from tests.integration.prom_scenario import (
    HISTORY_HOURS,
    HISTORY_METRICS,
    HISTORY_STEP_S,
    from_epoch,
    make_fleet,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def write_history(fleet: SimFleet, path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for chunk in fleet.openmetrics_history(
            hours=HISTORY_HOURS,
            step_s=HISTORY_STEP_S,
            metrics=list(HISTORY_METRICS),
            end=fleet.now,
            max_series=10_000,
        ):
            out.write(chunk)


def serve(fleet: SimFleet, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404)
                return
            body = fleet.exposition(at=datetime.now(UTC)).encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # one line a second per scrape is noise

    # Single-threaded on purpose: the fleet's snapshot cache is not shared across threads, and
    # Prometheus scrapes one target at a time.
    server = HTTPServer(("127.0.0.1", port), Handler)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--now", required=True, help="epoch seconds the fleet is built around")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--port", type=int, help="serve /metrics on 127.0.0.1:PORT")
    mode.add_argument("--history", help="write the OpenMetrics history to this file and exit")
    args = parser.parse_args(argv)
    fleet = make_fleet(from_epoch(args.now))
    if args.history:
        write_history(fleet, args.history)
    else:
        serve(fleet, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
