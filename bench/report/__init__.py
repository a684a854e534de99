"""Rendering results for people: terminal tables (table), the HTML report (html, charts,
templates/), the Markdown summary (markdown), JUnit XML (junit) and ``bench report`` (command)."""
