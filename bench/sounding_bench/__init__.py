"""Metrics and harnesses behind `sounding eval …`. Only these read evaluation ground truth."""
