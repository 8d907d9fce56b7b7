"""``python -m calibrate`` (see calibrate.cli for the command lines)."""
import sys

from calibrate.cli import main

sys.exit(main())
