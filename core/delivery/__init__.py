"""Sending what the user did not just ask for, once: the send, access re-checked before it."""
