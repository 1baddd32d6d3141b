"""Collections and ingestion: validate, chunk, embed through the sidecar, write whole batches."""
