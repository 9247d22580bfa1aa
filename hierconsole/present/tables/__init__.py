"""The domain's tables as `Grid`s, one builder per table, shared by the CLI and the console."""
