"""The configuration: its model, the file it lives in, the environment's
overrides, what a reload changed, and the one-line errors for each."""
