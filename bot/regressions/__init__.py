"""Fleet regressions: which software rollout made training slower (or faster), by how much."""
