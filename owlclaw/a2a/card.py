"""A served agent's A2A agent card: who it is (IDENTITY.md, else SOUL.md), what it can do (its
SKILL.md skills), where to call it (JSON-RPC at ``/a2a/<agent id>``) and how (the webhook's
bearer token). The card itself is public, as A2A discovery expects."""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

from owlclaw.app import AgentApp

BEARER = "bearer"
"""The name of the card's one security scheme."""
TEXT = "text/plain"


def first_paragraph(markdown: str) -> str:
    """The first paragraph of a Markdown file that is not a heading."""
    paragraphs = (p.strip() for p in markdown.split("\n\n"))
    return next((p for p in paragraphs if p and not p.startswith("#")), "")


def agent_card(app: AgentApp, url: str) -> AgentCard:
    """The card of ``app``'s agent, answering at ``url`` (its JSON-RPC endpoint); its version
    is its IDENTITY.md's hash, so a client sees when the agent changed."""
    description = first_paragraph(app.identity) or first_paragraph(app.soul)
    skills = [
        AgentSkill(id=name, name=name, description=skill.meta.description, tags=[name])
        for name, skill in sorted(app.skills.items())
    ]
    bearer = HTTPAuthSecurityScheme(scheme="Bearer")
    return AgentCard(
        name=app.agent_id,
        description=description or f"the OwlClaw agent {app.agent_id}",
        version=app.identity_sha256[:12] or "0",
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=[TEXT],
        default_output_modes=[TEXT],
        skills=skills,
        security_schemes={BEARER: SecurityScheme(http_auth_security_scheme=bearer)},
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList(list=[])})],
    )
