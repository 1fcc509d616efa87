"""Input sources for ingestion: files landing in a directory, and a demo change stream."""
