"""Test and resume: the site's validation suite and how each step's output is read. Pure core."""
