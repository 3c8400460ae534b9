"""Declarations: row classes, roles, markers and the compiled table spec (pure, no I/O)."""
