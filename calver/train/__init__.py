"""calver.train."""
