"""Server: routing, discovery, OpenAPI, health, metrics, auth headers, the app shell."""
