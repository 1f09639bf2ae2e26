"""`meowbot doctor`: what works and what to fix, part by part (bot/doctor/run.py)."""
