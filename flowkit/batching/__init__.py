"""Batch-making: samplers (which items), pairing (prompt and target span), collation (padded tensors), the
builder that chains them."""
