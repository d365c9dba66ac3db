"""The Textual console: it renders state from the core and sends intents back."""
