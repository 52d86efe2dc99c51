"""Hermes' ``hermes_cli`` package as far as the seed test needs it: served by leasectl."""
