"""``SqlBroker`` and what it owns: its database's pool, publishing, table creation, PgBouncer
settings, whose clock says "now", the wake permits of its subscriptions, LISTEN/NOTIFY, and
the typed ``Publisher`` that publishes through it."""
