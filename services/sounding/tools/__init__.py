"""Tool routing that learns from use: toolsets, the router, and the loop that teaches it."""
