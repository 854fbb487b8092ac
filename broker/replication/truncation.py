"""Where a follower truncates its log: the HW rule (pre-0.11) and the leader-epoch rules (KIP-101/279).

Pure functions over an epoch cache, a LEO and an HW; the replica applies the step they return.

- "hw" (seeds 000 七, 003): truncate to the high watermark at once, fetch from there. The HW lags
  the leader's by a fetch round, so acknowledged records above it are thrown away (data loss), and a
  replica whose log differs below its HW keeps the difference (divergence).
- "kip-101": ask the leader where the follower's latest epoch ends; truncate to that offset.
- "leader-epoch" (KIP-279): the leader answers (E, end) with E its largest epoch <= the one asked;
  if the follower has E, truncate to min(end, the follower's own end of E), done; if not, the
  follower's records in epochs between E and its own next epoch cannot be in the leader's log:
  truncate to where its largest epoch below E ends and ask again with that epoch.
- UNDEFINED answer (the leader knows no epoch <= the asked one, e.g. it has an empty cache): fall
  back to the HW, as Kafka does; it is the only offset a follower knows to be committed.
"""
from __future__ import annotations

from dataclasses import dataclass

from broker.replication.epoch_cache import EpochCache, EpochEndOffset


@dataclass(frozen=True)
class TruncationStep:
    truncate_to: int | None       # None: keep the log as it is
    why: str                      # for the truncate event
    ask_again_epoch: int | None   # None: truncation finished, start fetching


def first_query_epoch(cache: EpochCache) -> int | None:
    """The epoch a follower asks about first: its latest. None: nothing to ask (empty cache)."""
    return cache.latest_epoch()


def after_epoch_answer(mode: str, cache: EpochCache, leo: int, hw: int, answer: EpochEndOffset) -> TruncationStep:
    """What a follower does with the leader's answer to OffsetsForLeaderEpoch."""
    if answer.undefined:
        return TruncationStep(min(hw, leo), "hw", None)
    if mode == "kip-101":
        return TruncationStep(min(answer.end_offset, leo), "leader-epoch", None)
    mine = cache.end_offset_for(answer.epoch, leo)
    if mine.undefined:
        # The follower knows no epoch <= the leader's: everything it has past the leader's end goes.
        return TruncationStep(min(answer.end_offset, leo), "leader-epoch", None)
    if mine.epoch == answer.epoch:
        # Includes an answer epoch below the follower's first epoch: end_offset_for then echoes it
        # with the first epoch's start offset, and nothing from there on is in the leader's log.
        return TruncationStep(min(answer.end_offset, mine.end_offset, leo), "leader-epoch", None)
    # The follower does not have the leader's epoch: drop its epochs in (mine.epoch, answer.epoch]
    # and above, ask again about the largest epoch it still has.
    return TruncationStep(min(mine.end_offset, leo), "leader-epoch", mine.epoch)
