"""Optional adapters over trinbox's event hook: ``trinbox.metrics.prometheus`` (the
``trinbox[prometheus]`` extra) and ``trinbox.metrics.otel`` (``trinbox[otel]``)."""
