"""``python -m ctxsim.harness.cli ...``: the same as the ``ctxsim`` script (the check commands of the
issues are written that way, so they run from a worktree without an installed script)."""

import sys

from ctxsim.harness.cli import main

sys.exit(main())
