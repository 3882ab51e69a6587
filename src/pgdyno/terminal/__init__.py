"""Renderers: records in, text out (terminal tables, JSON)."""
