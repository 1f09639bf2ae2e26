"""The bot's own Prometheus metrics, served on `/metrics`.

A registry per app instance (not the global default) so that several apps in one process, as
in the multi-replica tests, do not collide.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

ACK_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 3.0, 5.0)


class Telemetry:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.commands = Counter(
            "meowbot_commands", "Slash commands received", ["command"], registry=self.registry
        )
        self.ack_latency = Histogram(
            "meowbot_ack_latency_seconds",
            "Time from a Slack request's arrival to its HTTP answer (the ack)",
            ["kind"],
            buckets=ACK_BUCKETS_S,
            registry=self.registry,
        )
        self.backend_errors = Counter(
            "meowbot_backend_errors",
            "Calls to a backend that failed",
            ["backend"],
            registry=self.registry,
        )
        self.webhooks = Counter(
            "meowbot_alertmanager_webhooks",
            "Alertmanager webhook posts, by outcome (stored, unauthorized, bad, store_down)",
            ["outcome"],
            registry=self.registry,
        )
        self.duplicate_events = Counter(
            "meowbot_duplicate_events",
            "Slack event deliveries dropped as already processed",
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
