"""`python -m hierconsole` is the `hierconsole` command."""

import sys

from hierconsole.cli import main

sys.exit(main())
