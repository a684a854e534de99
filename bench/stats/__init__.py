"""Statistics over result rows."""
