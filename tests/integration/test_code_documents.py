"""A code or configuration file stored as a document keeps its "#" comment lines in its passages: they are no
Markdown headings, so the text is not cut at them and search finds what they explain. With the real default model
on a real DuckDB file: cut at its comments, the YAML below was found by no search for its production database."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.model import DocumentInput

pytestmark = pytest.mark.model

YAML = """spring:
  # WARNING: production database, read-only user
  datasource:
    url: jdbc:postgresql://db.prod:5432/orders
    username: readonly
  # Connection pool
  hikari:
    maximum-pool-size: 20
"""
SCRIPT = "# Build the image\ndocker build -t orders .\n# Push to ECR\ndocker push 123.dkr.ecr.aws/orders\n"
NOTES = "# Deploy\nRun the script.\n# Rollback\nRedeploy the previous tag.\n"


def passages(kb, document_id: str) -> list[tuple[str, str]]:
    return [(c.section, c.text) for c in kb.store.document_chunks(kb.namespace, [document_id])]


def test_comment_lines_of_code_and_configuration_stay_in_the_passages_and_are_found(real_kb) -> None:
    real_kb.add_documents([DocumentInput(id="config/application.yml", title="application.yml", text=YAML),
                           DocumentInput(id="scripts/deploy.sh", text=SCRIPT),
                           DocumentInput(id="docs/deploy.md", text=NOTES)])
    assert passages(real_kb, "config/application.yml") == [("", YAML.strip())]
    assert passages(real_kb, "scripts/deploy.sh") == [("", SCRIPT.strip())]
    # Markdown is still cut at its headings.
    assert passages(real_kb, "docs/deploy.md") == [("Deploy", "Run the script."),
                                                   ("Rollback", "Redeploy the previous tag.")]

    found = real_kb.search("what is the production datasource url?").passages
    assert found and found[0].document_id == "config/application.yml"
    assert "# WARNING: production database" in found[0].text and "db.prod:5432" in found[0].text


def test_search_shows_code_and_configuration_line_by_line_and_prose_on_one_line(real_kb) -> None:
    """search's text keeps a configuration file's indentation and a Markdown code block's lines, each after the
    "  | " marker (docs/search.md); it folded them onto the header's line ("spring: # WARNING: ... datasource:")."""
    guide = ("To rotate the orders database password:\n```bash\nvault write db/rotate \\\n  role=orders\n```\n"
             "Then restart the orders service.")
    real_kb.add_documents([DocumentInput(id="config/application.yml", title="application.yml", text=YAML),
                           DocumentInput(id="docs/rotate.md", title="Runbook", text=guide),
                           DocumentInput(id="docs/policy.md", title="Policy",
                                         text="Passwords rotate every 90 days.\nThe orders team rotates them.")])
    text = real_kb.search("what is the production datasource url?", token_budget=4000).text.splitlines()
    at = text.index("[config/application.yml#1] application.yml:")
    assert text[at + 1: at + 1 + len(YAML.splitlines())] == [f"  | {line}" for line in YAML.splitlines()]
    text = real_kb.search("how do I rotate the orders database password?", token_budget=4000).text.splitlines()
    at = next(i for i, line in enumerate(text) if line.startswith("[docs/rotate.md#"))
    assert text[at].endswith("] Runbook:")
    assert text[at + 1: at + 7] == ["  | To rotate the orders database password:", "  | ```bash",
                                    "  | vault write db/rotate \\", "  |   role=orders", "  | ```",
                                    "  | Then restart the orders service."]
    prose = next(line for line in text if line.startswith("[docs/policy.md#"))  # Markdown without a fence
    assert prose.endswith("] Policy: Passwords rotate every 90 days. The orders team rotates them.")
