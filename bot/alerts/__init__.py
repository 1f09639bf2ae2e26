"""Channel alerts: ingest (sweep, Alertmanager), dispatch (grouping), route, notify, act."""
