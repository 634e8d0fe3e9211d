"""Reports: report.json, report.md and a self-contained report.html."""
