"""Collectors of the run timeline: OS and PostgreSQL samplers."""
