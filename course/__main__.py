"""`python -m course …`: see course.commands."""

import sys

from course.commands import main

sys.exit(main())
