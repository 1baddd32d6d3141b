"""Inquire: sessions, domains, stop rules and question selection."""
