"""Sounding as a retriever of the agent frameworks (extras `langchain` and `llamaindex`): each
hit becomes the framework's document with Sounding's score and stated uncertainty in its
metadata, and one call reports what the agent did with them through Observe."""
