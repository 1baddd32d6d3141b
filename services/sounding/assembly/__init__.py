"""The assembly room: each process's wiring. What the orchestrator and the sidecar open, in
which order, how the pieces are handed to each other, and how the process starts, drains and
stops. Nothing here serves a request itself."""
