"""The order a search shows an entity's observations in (core/domain/observation_order.py): the query's rarer words
first, the rest newest first, and each observation after the later one that names what it names."""

from __future__ import annotations

from duckgraph.core.domain.observation_order import NAMES_FOLLOWED, by_relevance

#: A decision log kept as one project's observations, as a memory tool's user keeps it: a choice, then its reversal.
DECISIONS = [
    "2022-03-20: chose PostgreSQL as the primary database (JSONB, transactions, team experience)",
    "2022-05-02: chose Memcached as the caching layer because it is simpler to operate",
    "2022-08-01: chose RabbitMQ as the message queue; Kafka rejected as too complex",
    "2022-11-03: deploy on EC2 VMs with Ansible",
    "2023-02-14: switched to Redis, replacing Memcached (persistence, pub/sub for session invalidation)",
    "2023-09-12: moved to Kubernetes (EKS), decided by Priya Raman",
    "2024-01-22: replaced RabbitMQ with Kafka for replay and throughput",
]


def test_an_entitys_observations_that_share_a_form_of_the_querys_words_come_first() -> None:
    ana = ["Sam's partner", "Works as a pediatric nurse", "Plays cello in a community orchestra"]
    assert by_relevance("What instrument does Ana play?", {1: ana}, {})[1][0] == (
        "Plays cello in a community orchestra")
    assert by_relevance("Where does Ana work?", {1: ana}, {})[1][0] == "Works as a pediatric nurse"
    # No shared word: the newest first (a later observation corrects an earlier one); those that share the same
    # words keep stored order (on LoCoMo's observations the words, not recency, pick the evidence).
    assert by_relevance("Who is Ana?", {1: ana}, {})[1] == ana[::-1]
    assert by_relevance("Does Ana play?", {1: [*ana, "Plays piano now"]}, {})[1] == [
        "Plays cello in a community orchestra", "Plays piano now", "Works as a pediatric nurse", "Sam's partner"]


def test_an_observation_comes_after_the_later_one_that_names_what_it_names() -> None:
    # "caching" is the old choice's word only: without the name they share, the reversal sat among the unrelated
    # rest (third, after Kafka and Kubernetes), where a budget cuts it and the old choice reads as current.
    caching = by_relevance("What do we use for caching now?", {1: DECISIONS}, {1: ["Orion Platform"]})[1]
    assert caching[:2] == [DECISIONS[4], DECISIONS[1]]
    assert caching[2:] == [DECISIONS[i] for i in (6, 5, 3, 2, 0)]  # the rest newest first, as before
    # The same for the queue: Kafka replaced RabbitMQ; the reversal names both.
    queue = by_relevance("Which message queue do we use and why?", {1: DECISIONS}, {1: ["Orion Platform"]})[1]
    assert queue[:2] == [DECISIONS[6], DECISIONS[2]]
    # A reversal the query's words rank before the old one stays there; the old one follows in its own place.
    redis = by_relevance("Why did we switch to Redis?", {1: DECISIONS}, {1: ["Orion Platform"]})[1]
    assert redis[0] == DECISIONS[4] and redis.count(DECISIONS[4]) == 1 and len(redis) == len(DECISIONS)


def test_only_a_rare_name_links_two_observations() -> None:
    # A common word ("name" of "named") links nothing: the correction stays first among the unmatched ones.
    alex = ["Name is Alex Morgan", "Lives in Portland, Oregon", "Has a dog named Biscuit, a beagle",
            "Moved to Seattle in October 2026"]
    assert by_relevance("Where does Alex live now?", {1: alex}, {})[1] == [alex[0], alex[1], alex[3], alex[2]]
    # Nor does the entity's own name, which its observations write as a reference memory's user writes them.
    ana = ["Ana adopted a greyhound called Zephyr.", "Ana starts as a pastry chef at the Lumiere bakery."]
    assert by_relevance("What breed is Zephyr?", {1: ana}, {1: ["Ana", "Ana Lima"]})[1] == ana
    # A name more than NAMES_FOLLOWED observations write is the entity's topic, not one thing said of it.
    notes = [f"Talked with Melanie about topic {i}" for i in range(NAMES_FOLLOWED)]
    log = ["Melanie recommended the Lisbon trip", *notes]
    assert by_relevance("Who recommended the trip?", {1: log}, {})[1] == [log[0], *notes[::-1]]
