"""What a namespace name may be, the name made of a root folder, and the namespace settings."""

from __future__ import annotations

import unicodedata

import pytest

from duckgraph.core.config import load_settings
from duckgraph.core.doctor import namespace_choice
from duckgraph.core.domain.namespaces import check_namespace, namespace_from_folder
from duckgraph.ports import ConfigError, InvalidInputError


@pytest.mark.parametrize("name", ["default", "my-app", "team/api.v2", "A_1", "x" * 100])
def test_valid_names_pass(name: str) -> None:
    assert check_namespace(name) == name


@pytest.mark.parametrize("name", ["", "a b", "x" * 101, "naïve", "projekt-ł", "semi;colon", "@roots", None, 3,
                                  "alpha\n", "default\n"])  # "$" alone matched before a final newline
def test_other_names_are_refused_with_the_rule(name: object) -> None:
    with pytest.raises(InvalidInputError, match=r"ASCII letters \(a-z, A-Z\), digits \(0-9\), '-', '_', '\.' or '/'"):
        check_namespace(name)


def test_a_name_too_long_is_given_by_its_length_not_echoed() -> None:
    with pytest.raises(InvalidInputError) as refused:
        check_namespace("x" * 1_000)
    assert str(refused.value) == ("invalid namespace (1,000 characters): use 1 to 100 ASCII letters (a-z, A-Z), "
                                  "digits (0-9), '-', '_', '.' or '/'")


@pytest.mark.parametrize(("folder", "namespace"), [
    ("api-server", "api-server"), ("My App", "My-App"), ("x" * 150, "x" * 100), ("", None), ("  ", None),
])
def test_a_folder_name_is_made_valid(folder: str, namespace: str | None) -> None:
    assert namespace_from_folder(folder) == namespace


def test_folders_named_with_other_letters_get_memories_of_their_own() -> None:
    # Replaced alone, these all became "Caf" or nothing (and then the fallback): one memory for many projects.
    folders = ["Café", "Cafü", "Caf", "Проект", "東京", "日本語", "  été 2026 "]
    namespaces = [namespace_from_folder(f) for f in folders]
    assert len(set(namespaces)) == len(folders) and all(check_namespace(n) == n for n in namespaces)
    assert namespaces[0].startswith("Caf-") and namespaces[-1].startswith("t-2026-")
    assert namespace_from_folder("Café") == namespaces[0]  # the same folder, the same memory
    assert namespace_from_folder(unicodedata.normalize("NFD", "Café")) == namespaces[0]  # however it is encoded


def test_the_settings_take_roots_and_a_fallback(tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    roots = load_settings(env={"DUCKGRAPH_CONFIG": str(config), "DUCKGRAPH_NAMESPACE": "@roots",
                               "DUCKGRAPH_NAMESPACE_FALLBACK": "shared"})
    assert roots.from_roots and roots.default_namespace == "shared"
    assert namespace_choice(roots)["default"] == "shared" and "root folder" in namespace_choice(roots)["why"]
    plain = load_settings(env={"DUCKGRAPH_CONFIG": str(config)}, namespace="proj")
    assert not plain.from_roots and plain.default_namespace == "proj"
    with pytest.raises(ConfigError, match="invalid namespace 'a b'"):
        load_settings(env={"DUCKGRAPH_CONFIG": str(config), "DUCKGRAPH_NAMESPACE": "a b"})
    with pytest.raises(ConfigError, match="namespace_fallback"):
        load_settings(env={"DUCKGRAPH_CONFIG": str(config), "DUCKGRAPH_NAMESPACE_FALLBACK": "@roots"})
