"""The :meow_party: highlights: reactions tracked per message, the weekly digest, stats, backfill.

Pure domain: models, rules, the schedule, privacy, ranking and stats, and the services that
drive them through ports (bot/highlights/ports.py). No Slack, aiohttp or redis imports here:
the Redis adapter is bot/backends/highlight_store.py, Slack's side bot/backends/slack_directory.py.
"""
