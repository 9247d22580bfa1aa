"""hierconsole: controlled hierarchy-aware retrieval studies on frozen image features."""

__version__ = "0.1.0"
