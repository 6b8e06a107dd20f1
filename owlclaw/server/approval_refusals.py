"""The HTTP status and code of each reason an approval's answer is refused (nothing recorded):
the webhook answers them, and clients (the CLI) tell them apart by the code."""

from __future__ import annotations

from events.agent_state import (
    ApprovalClosed,
    DigestMismatch,
    InvalidAnswer,
    SameApprover,
    SelfApproval,
    UnknownApproval,
)
from owlclaw.runtime.approvals import NotApprover

REFUSALS: tuple[tuple[type[ApprovalClosed], int, str], ...] = (
    (UnknownApproval, 404, "unknown_approval"),
    (InvalidAnswer, 400, "invalid_answer"),
    (SelfApproval, 403, "self_approval"),
    (NotApprover, 403, "forbidden"),
    (DigestMismatch, 409, "digest_mismatch"),
    (SameApprover, 409, "same_approver"),
)


def refusal_of(error: ApprovalClosed) -> tuple[int, str]:
    """(status, code); any other ApprovalClosed (answered, expired, not an approver the
    governance names) is 409 ``approval_closed``."""
    return next(
        ((status, code) for kind, status, code in REFUSALS if isinstance(error, kind)),
        (409, "approval_closed"),
    )
