"""Rendering a run as one HTML page with PNG figures (no file I/O)."""
