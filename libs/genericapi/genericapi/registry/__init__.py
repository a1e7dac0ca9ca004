"""Registry: one generic store per resource plus a strategy per kind (objects and rules)."""
