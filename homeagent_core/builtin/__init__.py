"""Built-in plugins, registered through DEFAULT_PLUGINS exactly like third-party ones."""
