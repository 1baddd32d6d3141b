"""The models sidecar (server, embedder, generators, micro-batching) and its client.

Only this package imports torch, and only in the modules the sidecar itself loads.
"""
