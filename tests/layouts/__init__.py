"""Replica layouts that exist only for the tests (registered by the tests that use them)."""
