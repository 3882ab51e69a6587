"""Catalogs read from data/: the per-second metrics and what wait events mean."""
