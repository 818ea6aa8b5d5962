"""PBS queuejob hook: every new job waits for cpsched, on an operator hold users cannot lift.

Install (as a PBS Manager):
    qmgr -c "create resource extsched type=string"
    qmgr -c "create hook cpsched_hold event=queuejob"
    qmgr -c "import hook cpsched_hold application/x-python default pbs_queuejob_hold.py"

A job of a queue in UNMANAGED_QUEUES, or of a reservation's queue (``pbs_rsub``: R12, S3,
M7, which PBS's scheduler runs within the reservation), is left to PBS's own scheduler.
Every other job gets
``Hold_Types = o`` (an operator hold: only an Operator or Manager releases it, and PBS's
dependencies, which use the system hold ``s``, leave it alone) and the tag
``Resource_List[TAG] = "True"``, which the bridge (``backend = "pbs"``) looks for; the
bridge starts it with ``qrun -H`` on the vnodes cpsched chose. A job submitted on hold
(``qsub -h``) keeps its user hold too: cpsched will not start it until the user releases
that hold. An array's holds apply to each of its subjobs. A held job touches WAKE_FILE,
which starts a bridge cycle at once (the bridge's ``wake_file``; its default here).

The hook never rejects a job: whatever it cannot read, it accepts the job unchanged and
logs why, so that a bug here never stops submission.
"""

import re
from contextlib import suppress
from pathlib import Path

import pbs  # type: ignore[import-not-found]  # PBS's hook runtime: this runs in the server

TAG = "extsched"
UNMANAGED_QUEUES: set[str] = set()  # e.g. {"express"}: queues PBS's own scheduler keeps
RESERVATION_QUEUE = re.compile(r"^[RSM][0-9]+$")  # a reservation's queue is named by its id
WAKE_FILE = Path("/var/lib/cpsched-bridge/wake")  # the bridge's wake_file: a new job, a cycle now


def _wake() -> None:
    with suppress(OSError):  # the bridge's periodic cycle will see the job
        WAKE_FILE.touch()


def _queue_name(job: "pbs.job") -> str:
    """The queue the job was submitted to. Without ``-q`` PBS has not assigned its default
    queue yet when the hook runs: ``job.queue`` is then the string ``''``, not a queue."""
    queue = job.queue
    name = getattr(queue, "name", None) if queue else None
    if name:
        return str(name)
    return str(pbs.server().default_queue or "")


event = pbs.event()
try:
    job = event.job
    queue = _queue_name(job)
    if queue not in UNMANAGED_QUEUES and not RESERVATION_QUEUE.match(queue):
        # Tagged first: a job held but not tagged would wait for no one.
        job.Resource_List[TAG] = "True"
        holds = str(job.Hold_Types or "").replace("n", "")
        job.Hold_Types = pbs.hold_types(holds if "o" in holds else holds + "o")
        pbs.logmsg(pbs.LOG_DEBUG, "cpsched: job held for the external scheduler")
        _wake()
except Exception as exc:  # never let the hook reject a submission
    pbs.logmsg(pbs.LOG_ERROR, f"cpsched hook: job left to PBS unchanged: {exc!r}")
event.accept()
