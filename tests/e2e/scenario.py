"""A small, hand-written knowledge base about three astronomers, shared by the end-to-end tests.

Each fact in the graph is stated in one of the documents, and nodes and edges point at them by `source_ids`.
"""

from __future__ import annotations

from typing import Any

DOCUMENTS: list[dict[str, Any]] = [
    {
        "id": "doc-rubin",
        "title": "Vera Rubin",
        "text": (
            "Vera Rubin was an American astronomer who spent her career at the Carnegie Institution for Science "
            "in Washington, D.C. Together with the instrument builder Kent Ford she measured how fast stars orbit "
            "in the Andromeda Galaxy, and the flat rotation curves they found became key evidence for dark matter."
        ),
        "metadata": {"topic": "astronomy"},
    },
    {
        "id": "doc-payne",
        "title": "Cecilia Payne-Gaposchkin",
        "text": (
            "Cecilia Payne-Gaposchkin was a British-born astronomer who worked at the Harvard College Observatory. "
            "Her 1925 doctoral thesis showed that stars are made mostly of hydrogen and helium."
        ),
    },
    {
        "id": "doc-bell",
        "title": "Jocelyn Bell Burnell",
        "text": (
            "Jocelyn Bell Burnell discovered the first radio pulsars in 1967 while she was a graduate student at "
            "the University of Cambridge, where her thesis supervisor was Antony Hewish."
        ),
    },
]

NODES: list[dict[str, Any]] = [
    {"name": "Vera Rubin", "type": "Person", "description": "American astronomer who studied galaxy rotation.",
     "source_ids": ["doc-rubin"]},
    {"name": "Carnegie Institution for Science", "type": "Organization",
     "description": "Research institution in Washington, D.C.", "aliases": ["Carnegie Institution"],
     "source_ids": ["doc-rubin"]},
    {"name": "Kent Ford", "type": "Person", "description": "American astronomer and instrument builder.",
     "source_ids": ["doc-rubin"]},
    {"name": "Andromeda Galaxy", "type": "Galaxy", "description": "Spiral galaxy nearest to the Milky Way.",
     "source_ids": ["doc-rubin"]},
    {"name": "dark matter", "type": "Concept", "description": "Unseen matter inferred from its gravity.",
     "source_ids": ["doc-rubin"]},
    {"name": "Cecilia Payne-Gaposchkin", "type": "Person",
     "description": "Astronomer who found that stars are mostly hydrogen and helium.", "source_ids": ["doc-payne"]},
    {"name": "Harvard College Observatory", "type": "Organization",
     "description": "Astronomical observatory of Harvard University.", "source_ids": ["doc-payne"]},
    {"name": "Jocelyn Bell Burnell", "type": "Person", "description": "Astrophysicist who discovered pulsars.",
     "source_ids": ["doc-bell"]},
    {"name": "University of Cambridge", "type": "University", "description": "University in Cambridge, England.",
     "source_ids": ["doc-bell"]},
    {"name": "Antony Hewish", "type": "Person", "description": "British radio astronomer.",
     "source_ids": ["doc-bell"]},
    {"name": "pulsar", "type": "AstronomicalObject", "description": "Rotating neutron star that emits radio pulses.",
     "source_ids": ["doc-bell"]},
]

EDGES: list[dict[str, Any]] = [
    {"source": "Vera Rubin", "target": "Carnegie Institution for Science", "type": "EMPLOYED_BY",
     "description": "Vera Rubin worked at the Carnegie Institution for Science.", "source_ids": ["doc-rubin"]},
    {"source": "Vera Rubin", "target": "Kent Ford", "type": "COLLABORATED_WITH", "source_ids": ["doc-rubin"]},
    {"source": "Vera Rubin", "target": "Andromeda Galaxy", "type": "OBSERVED", "source_ids": ["doc-rubin"]},
    {"source": "Vera Rubin", "target": "dark matter", "type": "FOUND_EVIDENCE_FOR", "weight": 0.9,
     "source_ids": ["doc-rubin"]},
    {"source": "Cecilia Payne-Gaposchkin", "target": "Harvard College Observatory", "type": "EMPLOYED_BY",
     "source_ids": ["doc-payne"]},
    {"source": "Jocelyn Bell Burnell", "target": "pulsar", "type": "DISCOVERED", "source_ids": ["doc-bell"]},
    {"source": "Jocelyn Bell Burnell", "target": "University of Cambridge", "type": "STUDIED_AT",
     "source_ids": ["doc-bell"]},
    {"source": "Antony Hewish", "target": "Jocelyn Bell Burnell", "type": "SUPERVISED", "source_ids": ["doc-bell"]},
]
