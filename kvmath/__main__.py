"""``python -m kvmath``: the console script's entry (:mod:`kvmath.entry`)."""
import sys

from kvmath.entry import main

sys.exit(main())
