"""prometheus-alertmanager on loopback, sending its webhooks to up to three meowbot replicas.

The receiver has three webhook_configs, on free ports chosen here (MEOWBOT_TEST_AM_WEBHOOK_PORTS):
a test starts its bot replicas' HTTP servers there. Nothing listening on a port is fine:
Alertmanager retries that one and the others still get theirs.
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

from .common import fail, free_port, lasting_port, stop, wait_port

PACKAGES = {"prometheus-alertmanager": "prometheus-alertmanager"}
REPLICAS = 3


def config(ports: list[int], token: str) -> str:
    hooks = "\n".join(
        f"""      - url: http://127.0.0.1:{p}/alertmanager
        send_resolved: true
        max_alerts: 0
        http_config:
          authorization:
            type: Bearer
            credentials: {token}"""
        for p in ports
    )
    return f"""route:
  receiver: meowbot
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 4h
receivers:
  - name: meowbot
    webhook_configs:
{hooks}
"""


@contextlib.contextmanager
def start(tmp: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    port = free_port()
    hooks = [lasting_port() for _ in range(REPLICAS)]
    token = secrets.token_hex(16)
    cfg = tmp / "alertmanager.yml"
    cfg.write_text(config(hooks, token))
    log = tmp / "alertmanager.log"
    cmd = [
        "prometheus-alertmanager",
        f"--config.file={cfg}",
        f"--storage.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    with log.open("wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        try:
            wait_port(port, 20, proc, "alertmanager")
        except SystemExit:
            fail("alertmanager", "did not start", [log])
        yield {
            "ALERTMANAGER_URL": f"http://127.0.0.1:{port}",
            "MEOWBOT_TEST_AM_WEBHOOK_PORTS": ",".join(map(str, hooks)),
            "MEOWBOT_TEST_AM_TOKEN": token,
        }
    finally:
        stop(proc)
