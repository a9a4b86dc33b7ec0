"""What strings steps together, one module per job, above every other floor: what a `ticketsim` command does (the CLI
only parses its arguments and calls one function here)."""
