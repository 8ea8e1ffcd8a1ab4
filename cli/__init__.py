"""Command-line interface (typer), file discovery, configuration and rendering."""
