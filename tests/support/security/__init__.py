"""Helpers the black-box security tests (tests/security/) share."""
