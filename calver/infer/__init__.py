"""calver.infer."""
