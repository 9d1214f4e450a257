"""Synthesis: from text (and an optional speaker prompt) to latents and audio."""
