"""A conversation turn: the manager with its session cache, the chat prompt,
recovery of unanswered messages, and the reply event a finished turn sends."""
