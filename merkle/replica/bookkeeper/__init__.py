"""Apache BookKeeper bookies as a replica layout (issue 38)."""
