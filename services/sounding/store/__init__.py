"""LanceDB tables, their schemas, and the read-only view the strategy workers use."""
