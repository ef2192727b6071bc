"""``python -m tfaccel``."""

from tfaccel.cli import main

raise SystemExit(main())
