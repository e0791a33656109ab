import sys

from kvmath.cli.main import main

sys.exit(main())
