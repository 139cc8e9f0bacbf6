import sys

from rankcollapse.cli import main

sys.exit(main())
