"""The test fleet as exporters: live exposition for Prometheus to scrape, or its history.

    python -m tests.integration.sim_exporter --now EPOCH --port P [--aliases F]   # serve /metrics
    python -m tests.integration.sim_exporter --now EPOCH --history F    # write OpenMetrics, exit

Both build the fleet of prom_scenario.make_fleet from the same ``--now``, so the scrape picks up
exactly where the backfilled history ends. /metrics is the fleet at the wall-clock instant of
the last render (one a second, by a thread of its own: see `Exposition`): counters keep
counting and faults stay on, as on a real cluster. The series carry
their own ``instance`` and ``job`` labels, so Prometheus must scrape with ``honor_labels``.

``--aliases F``: a JSON object {scenario job id: Slurm job id} that tests write once they have
submitted a scenario job to the real Slurm (whose ids cannot be chosen); from then on the live
step times of that job carry Slurm's id, as a real job's exporter would. A list of ids instead
({scenario job id: [id, ...]}) writes each of the job's series once under each id: a test
that runs a copy of a scenario job elsewhere (a Kubernetes job, `namespace/kind/name`) lists
the scenario id too, so the tests that read the job under its own id still find it.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer

from bot import metric_names as m
from bot.backends.sim.fleet import SimFleet
from tests.integration.prom_scenario import (
    HISTORY_HOURS,
    HISTORY_METRICS,
    HISTORY_STEP_S,
    STEP_HISTORY_HOURS,
    STEP_HISTORY_STEP_S,
    from_epoch,
    make_fleet,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


EOF_LINE = "# EOF\n"


def write_history(fleet: SimFleet, path: str) -> None:
    """The counters' last hours at the scrape's minute, then the step times over a day and a
    bit at a coarser step (yesterday's pace), as one OpenMetrics file with one ``# EOF``."""
    passes = (
        (HISTORY_HOURS, HISTORY_STEP_S, list(HISTORY_METRICS)),
        (STEP_HISTORY_HOURS, STEP_HISTORY_STEP_S, [m.TRAINING_STEP_TIME_SECONDS]),
    )
    with open(path, "w", encoding="utf-8") as out:
        for hours, step_s, metrics in passes:
            text = "".join(
                fleet.openmetrics_history(
                    # About 13.5k estimated: the newer racks' counters are estimated for every
                    # node (only a quarter exports them), and the last-Xid gauge is read at
                    # resume times too.
                    hours=hours,
                    step_s=step_s,
                    metrics=metrics,
                    end=fleet.now,
                    max_series=16_000,
                )
            )
            out.write(text.removesuffix(EOF_LINE))
        out.write(EOF_LINE)


def read_aliases(path: str | None) -> dict[str, tuple[str, ...]]:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}  # not written yet (or half-written): no aliases this scrape
    if not isinstance(data, dict):
        return {}
    return {
        str(k): tuple(str(i) for i in v) if isinstance(v, list) else (str(v),)
        for k, v in data.items()
    }


def aliased(body: str, aliases: dict[str, tuple[str, ...]]) -> str:
    for scenario_id, real_ids in aliases.items():
        needle = f'{m.LABEL_JOB_ID}="{scenario_id}"'
        if needle not in body or not real_ids:
            continue
        if len(real_ids) == 1:
            body = body.replace(needle, f'{m.LABEL_JOB_ID}="{real_ids[0]}"')
            continue
        lines = []
        for line in body.split("\n"):
            if needle in line:
                lines.extend(line.replace(needle, f'{m.LABEL_JOB_ID}="{i}"') for i in real_ids)
            else:
                lines.append(line)
        body = "\n".join(lines)
    return body


RENDER_EVERY_S = 1.0  # the test Prometheus scrapes every second


class Exposition:
    """The fleet's exposition, rendered again every second by one thread, served as the last
    bytes rendered. Rendering 144 nodes takes 0.2-1.4 s of Python on 2 busy cores: rendered
    inside the scrape it passed Prometheus' 1 s timeout, and a failed scrape marks every
    series stale, so tests read metrics as absent. Served from here, a scrape never waits;
    its values are at most a render old."""

    def __init__(self, fleet: SimFleet, aliases: str | None) -> None:
        self.fleet = fleet
        self.aliases = aliases
        self.body = self.render()
        self.stop = threading.Event()

    def render(self) -> bytes:
        text = self.fleet.exposition(at=datetime.now(UTC))
        return aliased(text, read_aliases(self.aliases)).encode()

    def run(self) -> None:
        # Only this thread touches the fleet (its snapshot cache is not thread-safe); the
        # handler reads `body`, swapped whole.
        while not self.stop.is_set():
            started = time.monotonic()
            self.body = self.render()
            self.stop.wait(max(0.0, RENDER_EVERY_S - (time.monotonic() - started)))


def serve(fleet: SimFleet, port: int, aliases: str | None = None) -> None:
    exposition = Exposition(fleet, aliases)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404)
                return
            body = exposition.body
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # one line a second per scrape is noise

    renderer = threading.Thread(target=exposition.run, name="render", daemon=True)
    renderer.start()
    server = HTTPServer(("127.0.0.1", port), Handler)
    try:
        server.serve_forever()
    finally:
        exposition.stop.set()
        server.server_close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--now", required=True, help="epoch seconds the fleet is built around")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--port", type=int, help="serve /metrics on 127.0.0.1:PORT")
    mode.add_argument("--history", help="write the OpenMetrics history to this file and exit")
    parser.add_argument("--aliases", help="JSON file of job ids to rename in /metrics")
    args = parser.parse_args(argv)
    fleet = make_fleet(from_epoch(args.now))
    if args.history:
        write_history(fleet, args.history)
    else:
        serve(fleet, args.port, args.aliases)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
