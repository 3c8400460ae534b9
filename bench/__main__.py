"""``python -m bench`` (what ``scripts/bench`` runs): see bench/run.py."""

from .run import main

main()
