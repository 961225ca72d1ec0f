"""Package data: the bundled tokenizer file and the demo catalog."""
