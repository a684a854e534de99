"""Rendering results for people: terminal tables (table), the HTML report (html, charts,
templates/), the Markdown summary (markdown), JUnit XML (junit) and ``bench report`` (command).
What they show is gathered from stored runs by data (the runs and their rows), rates (the
tables of rates), drilldown (the page's per-row data) and caps (the caps on model text)."""
