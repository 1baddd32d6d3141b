"""Inquiry domains: what the hypotheses are, which questions exist, what answers mean."""
