"""Real DDP runs with torch.distributed: launcher, wrappers, timing, validation."""
