import sys

from tfa_sim.cli import main

sys.exit(main())
