"""Sounding: retrieval that states what it may have missed, over gRPC."""

__version__ = "0.1.0"
