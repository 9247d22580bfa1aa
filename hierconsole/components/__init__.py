"""Geometries and objectives a factorial can name: one file per component."""
