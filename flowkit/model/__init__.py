"""The network: conditions, the DiT, its presets, and the character-duration helpers."""
