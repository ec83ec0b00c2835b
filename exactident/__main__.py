import sys

from exactident.cli import main

sys.exit(main())
