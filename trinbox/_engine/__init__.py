"""Running: the ``App``, each subscription's startup checks, claim loop, delivery runner and
step rules, background tasks, and the statistics they count."""
