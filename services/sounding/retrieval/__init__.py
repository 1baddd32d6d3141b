"""Retrieve: strategies (arms), the executors that run them, fusion and the streamed result."""
