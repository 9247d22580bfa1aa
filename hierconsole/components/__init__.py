"""Geometries and objectives a factorial can name, one file per component; `hierconsole.registry` is
their index (names, arm codes, the protocol each provides). Importing this package imports no torch."""
