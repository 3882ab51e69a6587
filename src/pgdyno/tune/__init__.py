"""`pgdyno tune`: a configuration for every layer, its baselines, apply and rollback."""
