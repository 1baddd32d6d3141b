"""gRPC servicers and the orchestrator server: protos <-> domain, no algorithms."""
