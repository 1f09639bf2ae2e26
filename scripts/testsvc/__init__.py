"""Service starters for scripts/testenv.py: one module per service, standard library only.

Each module has `PACKAGES` (Debian package -> a binary it installs) and a context manager
`start(tmp: Path, env: dict[str, str]) -> Iterator[dict[str, str]]` that starts the service on
loopback and yields the variables telling the tests where it is. `env` holds what the
services started before it exported (Prometheus may need the simulated exporter's URL).
"""
