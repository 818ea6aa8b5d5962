"""PBS queuejob hook: every new job waits for cpsched, on a system hold users cannot lift.

Install (as a PBS Manager):
    qmgr -c "create resource extsched type=string"
    qmgr -c "create hook cpsched_hold event=queuejob"
    qmgr -c "import hook cpsched_hold application/x-python default pbs_queuejob_hold.py"

A job of a queue in UNMANAGED_QUEUES is left to PBS's own scheduler. Every other job gets
``Hold_Types = s`` (a system hold: only a Manager releases it) and the tag
``Resource_List[TAG] = "True"``, which the bridge (``backend = "pbs"``) looks for; the
bridge starts it with ``qrls -h s`` and ``qrun -H`` on the vnodes cpsched chose. A job
submitted on hold already (``qsub -h``) keeps its user hold too: cpsched will not start
it until the user releases that hold. The hook never rejects a job.
"""

import pbs  # type: ignore[import-not-found]  # PBS's hook runtime: this runs in the server

TAG = "extsched"
UNMANAGED_QUEUES: set[str] = set()  # e.g. {"express"}: queues PBS's own scheduler keeps

event = pbs.event()
job = event.job
queue = job.queue.name if job.queue is not None else ""
if queue not in UNMANAGED_QUEUES:
    holds = str(job.Hold_Types or "").replace("n", "")
    job.Hold_Types = pbs.hold_types(holds + "s" if "s" not in holds else holds)
    job.Resource_List[TAG] = "True"
    pbs.logmsg(pbs.LOG_DEBUG, "cpsched: job held for the external scheduler")
event.accept()
