"""The `kfs` command."""
