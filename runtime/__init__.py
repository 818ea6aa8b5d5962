"""What the service and the replay share to run a cluster: the policy (every setting,
one set of names), the cluster (dispatcher, predictor, durations), the duration book
(what the dispatcher plans with, what the predictor learns) and the codec (wire ⇄ core).

The same policy therefore means the same decisions in a replay and in the service.
"""

from cpsched.runtime.policy import Policy

__all__ = ["Policy"]
