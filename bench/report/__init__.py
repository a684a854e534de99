"""Rendering results for people: terminal tables (HTML reports come later)."""
