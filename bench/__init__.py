"""trinbox benchmarks: ``scripts/bench`` runs ``python -m bench`` (see bench/README.md)."""
