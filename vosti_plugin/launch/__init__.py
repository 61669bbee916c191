"""Launch contract check: run at engine init; an unverified launch aborts startup."""
