"""Checkpoint metadata from a training metric in Prometheus: loss (and tokens seen) per run and
step, one query a metric whatever the number of runs and checkpoints."""

from __future__ import annotations

from bot.backends.http import Deadline
from bot.backends.prometheus import PrometheusMetrics
from bot.playground.config import PlaygroundConfig

LOOKBACK = "30d"

Metadata = dict[tuple[str, int], tuple[float | None, int | None]]


def metric_query(metric: str, run_label: str, step_label: str) -> str:
    """The newest value of each (run, step) series. The names were checked by the config."""
    return f"max by ({run_label}, {step_label}) (last_over_time({metric}[{LOOKBACK}]))"


class TrainingMetrics:
    def __init__(self, prometheus: PrometheusMetrics, cfg: PlaygroundConfig) -> None:
        self.prometheus = prometheus
        self.cfg = cfg

    async def _read(self, metric: str, deadline: Deadline) -> dict[tuple[str, int], float]:
        rows = await self.prometheus.query(
            metric_query(metric, self.cfg.run_label, self.cfg.step_label),
            at=None,
            deadline=deadline,
        )
        out: dict[tuple[str, int], float] = {}
        for row in rows:
            labels = row.get("metric") or {}
            run, step = labels.get(self.cfg.run_label), labels.get(self.cfg.step_label)
            try:
                out[(str(run), int(str(step)))] = float(row["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue  # a series without a numeric step names no checkpoint
        return out

    async def read(self, timeout_s: float = 5.0) -> Metadata:
        """(loss, tokens seen) by (run, step); BackendError when Prometheus cannot answer."""
        deadline = Deadline(timeout_s)
        losses = await self._read(self.cfg.loss_metric, deadline) if self.cfg.loss_metric else {}
        tokens = (
            await self._read(self.cfg.tokens_metric, deadline) if self.cfg.tokens_metric else {}
        )
        return {
            key: (losses.get(key), int(tokens[key]) if key in tokens else None)
            for key in losses.keys() | tokens.keys()
        }

    async def close(self) -> None:
        await self.prometheus.close()
