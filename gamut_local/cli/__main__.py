"""`python -m gamut_local.cli`: the same as the `gamut-local` executable."""

import sys

from gamut_local.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
