"""Showing results to people: rich tables in the terminal, matplotlib figures."""
