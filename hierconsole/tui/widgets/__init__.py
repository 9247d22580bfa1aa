"""Widgets shared by the console's screens."""
