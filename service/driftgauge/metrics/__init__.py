"""Prometheus metrics built at scrape time from the latest stored results."""
