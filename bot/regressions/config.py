"""`regressions:` in MEOWBOT_CONFIG: where each component's history is read from. No I/O.

A component is an info metric and the label that carries its value, counted per node over
time. The three built-in ones read what dcgm-exporter and node_exporter export already; a
configured one adds any other (a container image, NCCL or CUDA version label):

    regressions:
      components:
        image: {metric: container_image_info, label: image}
        nccl: {metric: training_info, label: nccl_version}
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, field_validator

from bot import metric_names as m

METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
COMPONENT_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class InfoMetric(BaseModel):
    metric: str
    label: str

    @field_validator("metric")
    @classmethod
    def _metric(cls, value: str) -> str:
        if not METRIC_NAME_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a metric name")
        return value

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        if not LABEL_NAME_RE.fullmatch(value) or value.startswith("__"):
            raise ValueError(f"{value!r} is not a label name")
        return value


BUILT_IN: dict[str, InfoMetric] = {
    # Driver and VBIOS are labels on every DCGM series; any always-exported one carries them.
    "driver": InfoMetric(metric=m.DCGM_FI_DEV_GPU_TEMP, label=m.LABEL_DRIVER_VERSION),
    "kernel": InfoMetric(metric=m.NODE_UNAME_INFO, label=m.LABEL_RELEASE),
    "firmware": InfoMetric(metric=m.DCGM_FI_DEV_GPU_TEMP, label=m.LABEL_VBIOS_VERSION),
}


class RegressionsConfig(BaseModel):
    components: dict[str, InfoMetric] = Field(default_factory=dict)
    """Components beyond the built-in three (or a built-in one read elsewhere), by name."""
    sample_budget: int = Field(default=1_000_000, ge=100_000, le=40_000_000)
    """Samples one query may have Prometheus evaluate (series x steps): the step widens to
    stay under it whatever the fleet size or the window. Counting a node's series by their
    labels costs Prometheus about 1.5 s a million samples on a busy core, so the default keeps
    a read of 7 days at 4,096 nodes to a few seconds: node-level series (a kernel, or the
    recorded per-node rows) at 42-minute steps, the 32k raw GPU series that carry driver and
    VBIOS at 5.5-hour ones."""

    @field_validator("components")
    @classmethod
    def _names(cls, value: dict[str, InfoMetric]) -> dict[str, InfoMetric]:
        for name in value:
            if not COMPONENT_RE.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not a component name (lowercase letters, digits, - and _)"
                )
        return value

    def info_metrics(self) -> dict[str, InfoMetric]:
        """Every component the finder can read, built-in first."""
        return {**BUILT_IN, **self.components}
