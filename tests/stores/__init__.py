"""The stores the tests read, built in one place.

`fixed`: fabricated studies with fixed values, times and ids, through the real ingest and phase logic
(the console's snapshots, the read layer, the report). `real`: homes the real CLI and workers fill (a
registered tiny dataset, a finished family run), for tests that check what a user's run leaves behind.
"""
