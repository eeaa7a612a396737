"""The command-line front end, installed as the `attncomp` command (package `attncomp.cli`)."""
