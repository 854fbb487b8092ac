"""`python -m broker.controller --config FILE`: the controller process on its own (same as
`python -m broker controller --config FILE`)."""
import sys

from broker.controller.process import main

sys.exit(main())
