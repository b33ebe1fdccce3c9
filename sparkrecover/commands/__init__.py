"""One module per command: parse what the CLI hands over, call the core, render the result."""
