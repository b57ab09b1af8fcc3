"""The HTML report's parts (html_report.py puts the page together)."""
