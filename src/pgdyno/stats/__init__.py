"""Pure statistics on measurements."""
