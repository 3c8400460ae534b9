"""What holds a claimed row, one module per kind of hold: each alone owns its connections, its
tokens or keys, and the one order it takes them in. Below the engine, above the drivers and the
dialects."""
