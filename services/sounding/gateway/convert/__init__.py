"""Protobuf messages <-> the services' own types, one module per RPC family."""
