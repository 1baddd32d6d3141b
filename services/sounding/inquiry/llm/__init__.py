"""The llm inquiry domain's parts: task templates, state assessment, outcomes."""
