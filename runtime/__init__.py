"""The cluster runtime: the policy and what drives the dispatch core for one cluster.

The service and the replay both build their dispatchers and predictors here, so that the
same policy means the same decisions in both.
"""

from cpsched.runtime.policy import Policy

__all__ = ["Policy"]
