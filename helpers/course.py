"""The course's commands moved to the `course` package: `python -m helpers.course …` still works
for now, and says the new command (`python -m course …`) first."""

import sys

if __name__ == "__main__":
    print(f"(the command is now: python -m course {' '.join(sys.argv[1:])})", file=sys.stderr)
    from course.commands import main

    sys.exit(main())
