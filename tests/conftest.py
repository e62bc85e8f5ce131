"""Shared pytest configuration: a deterministic hypothesis profile for CI."""

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.load_profile("ci")
