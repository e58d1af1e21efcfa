"""Memory layers: working context, conversation log, documents, the graph and media."""
