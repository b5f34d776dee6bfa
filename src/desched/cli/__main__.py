"""``python -m desched.cli``: the ``desched`` command."""

import sys

from desched.cli import main

sys.exit(main())
