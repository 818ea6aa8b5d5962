"""PBS jobobit hook: a job ended, so the bridge plans again now (PBS's cpsched-wake).

Install (as a PBS Manager):
    qmgr -c "create hook cpsched_wake event=jobobit"
    qmgr -c "import hook cpsched_wake application/x-python default pbs_wake.py"

It only touches the bridge's wake file (keep WAKE_FILE equal to the bridge's
``wake_file``): it never blocks the server and costs nothing when the bridge is down.
"""

from contextlib import suppress
from pathlib import Path

import pbs  # type: ignore[import-not-found]  # PBS's hook runtime: this runs in the server

WAKE_FILE = Path("/var/lib/cpsched-bridge/wake")

with suppress(OSError):  # the bridge's periodic cycle will see the end
    WAKE_FILE.touch()
pbs.event().accept()
