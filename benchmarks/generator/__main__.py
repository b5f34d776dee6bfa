"""``python -m benchmarks.generator --nodes 50 -o cluster.json`` writes one snapshot."""

import sys

from benchmarks.generator.snapshot import main

sys.exit(main())
