"""hmapdev."""
