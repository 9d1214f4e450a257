"""Extra flow-time samplers for flowkit; the components live in `flowkit_tsamplers.samplers`."""
