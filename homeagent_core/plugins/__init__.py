"""Plugin hosting: discovery, the hook facade, registries and scoped SDKs."""
