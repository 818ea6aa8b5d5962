"""The replay's Slurm-like fair-share priority."""

from __future__ import annotations

from cpsched.replay.fairshare import FairShare
from tests.factories import job


def test_fair_share_favours_light_users_and_age():
    share = FairShare()
    heavy, light = job("h1", user="heavy", units=4), job("l1", user="light", units=1)
    share.seen(heavy)
    share.seen(light)
    share.charge(heavy, 0, 3600)
    share.charge(light, 0, 60)
    waiting_heavy = job("h2", user="heavy", submit=3600)
    waiting_light = job("l2", user="light", submit=3600)
    assert share.priority(waiting_light, 3600) > share.priority(waiting_heavy, 3600)
    # Old usage fades: a week on, the light user's new hour weighs more against the heavy
    # user's old one than it would if usage never decayed.
    later = 3600 + 7 * 86400
    forgetting, remembering = FairShare(), FairShare(half_life=10**12)
    for book in (forgetting, remembering):
        book.seen(heavy)
        book.charge(heavy, 0, 3600)
        book.charge(light, later - 3600, later)
    assert forgetting.priority(waiting_light, later) < remembering.priority(waiting_light, later)
    # Age counts up to max_age, at most weight_age (1,000).
    fresh = job("new", user="light", submit=later)
    assert 0 < share.priority(waiting_light, later) - share.priority(fresh, later) <= 1000
