"""Golden files: outputs of the current code stored on purpose, which the tests compare bit for bit."""
