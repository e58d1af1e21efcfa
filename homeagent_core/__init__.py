"""HomeAgent core."""
