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
