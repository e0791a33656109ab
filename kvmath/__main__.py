import sys

try:
    from kvmath.cli.main import main
except KeyboardInterrupt:  # an interrupt while the command line's modules load (issue 20)
    print("kvmath: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
