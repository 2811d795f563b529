"""Exact laws of τ_t and τ_max: one module per family of patterns, ``exact`` the table that
chooses among them, ``units`` the independent units they share, ``_limits`` what one
computation may spend."""
