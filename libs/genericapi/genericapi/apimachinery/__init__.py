"""Pure API machinery: no I/O, no web framework, no storage."""
