"""Sending what the user did not just ask for, once: the send, access re-checked
before it, the claim from take to settle, and the mirror into the transcript."""
