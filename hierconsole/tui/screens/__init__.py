"""The console's screens: one per view, plus the run detail, help and dialogs."""
