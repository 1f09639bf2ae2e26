"""A Prometheus of one test's own, scraping a fixed exposition every second from a loopback
exporter: for a metric set the shared test Prometheus does not have (a fleet without one
family, a training run's gauges). The caller waits for what it needs to be scraped."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from scripts.testsvc.common import free_port
from scripts.testsvc.prometheus import prometheus_command


@contextlib.asynccontextmanager
async def scraping(exposition: str, tmp: Path, job: str) -> AsyncIterator[str]:
    """Its URL, while it runs; stopped, and the exporter with it, after."""

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=exposition, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    exporter = free_port()
    await web.TCPSite(runner, "127.0.0.1", exporter).start()
    port = free_port()
    config = tmp / "prometheus.yml"
    scrape = {
        "job_name": job,
        "honor_labels": True,
        "static_configs": [{"targets": [f"127.0.0.1:{exporter}"]}],
    }
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": [scrape],
            }
        )
    )
    proc = subprocess.Popen(
        prometheus_command(config, tmp / "data", port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        await runner.cleanup()
