"""`kubernetes:` in MEOWBOT_CONFIG: how the Kubernetes adapter reads the cluster.

Where the cluster is comes from the environment (KUBECONFIG, or
MEOWBOT_KUBERNETES_IN_CLUSTER=true for the pod's service account); this section says what
to read there.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.backends import kubernetes_nodes as kn
from bot.backends.kubernetes_jobs import UserRule


class KubernetesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    context: str | None = None
    """The kubeconfig context to use (its current context when unset)."""
    node_selector: str = ""
    """A label selector for the nodes meowbot reads, e.g. `nvidia.com/gpu.present=true`
    (GPU Feature Discovery's label); every node when empty."""
    user_from: str = "namespace"
    """Whose a job is: `namespace` (one namespace per person) or `label:<key>` (a pod label)."""
    namespace_prefix: str = ""
    """Taken off a namespace to give the user (`u-ana` is ana with `u-`)."""
    rack_labels: tuple[str, ...] = kn.RACK_LABELS
    """Node labels naming the rack, the first a node has wins."""
    switch_labels: tuple[str, ...] = kn.SWITCH_LABELS
    """Node labels naming the leaf switch, the first a node has wins."""
    page_size: int = Field(5000, ge=1, le=100_000)
    timeout_s: float = Field(10.0, gt=0, le=300)

    @field_validator("user_from")
    @classmethod
    def _rule(cls, v: str) -> str:
        UserRule.parse(v)
        return v.strip() or "namespace"

    def user_rule(self) -> UserRule:
        return UserRule.parse(self.user_from, self.namespace_prefix)
