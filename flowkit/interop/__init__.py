"""Interoperation with other TTS projects' checkpoints (F5-TTS: `flowkit.interop.f5`)."""
