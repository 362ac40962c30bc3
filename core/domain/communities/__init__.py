"""Communities of the entity graph (hierarchical Leiden through the `CommunityDetector` port), their reports and
global search (see docs/communities.md). `CommunityService` is the entry point; `KnowledgeBase.communities` holds
one."""
