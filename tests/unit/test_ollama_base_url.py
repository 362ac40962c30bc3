"""Where the Ollama plugins send their requests: the base_url option, else OLLAMA_HOST, read by Ollama's own rule
(envconfig.Host): only a bare host gets Ollama's port 11434; a URL keeps its scheme's port (http 80, https 443),
so an Ollama behind a proxy at https://ollama.example.com is reached there, not at :11434."""

from __future__ import annotations

import pytest

from duckgraph.plugins.ollama import OllamaEmbedder, OllamaExtractor, resolve_base_url

FORMS = {
    "": "http://127.0.0.1:11434",  # unset
    "ollama.lan": "http://ollama.lan:11434",
    "ollama.lan:8080": "http://ollama.lan:8080",
    "127.0.0.1": "http://127.0.0.1:11434",
    "0.0.0.0": "http://127.0.0.1:11434",  # what a server listens on: this host
    "0.0.0.0:11435": "http://127.0.0.1:11435",
    "[::1]": "http://[::1]:11434",
    "[::1]:8080": "http://[::1]:8080",
    "::1": "http://[::1]:11434",
    "ollama.lan/prefix": "http://ollama.lan:11434/prefix",
    "http://ollama.lan": "http://ollama.lan",  # port 80
    "https://ollama.example.com": "https://ollama.example.com",  # port 443
    "https://ollama.example.com/": "https://ollama.example.com",
    "http://[::1]": "http://[::1]",
    "http://ollama.lan:11434": "http://ollama.lan:11434",
    "https://me:secret@ollama.example.com/ollama": "https://me:secret@ollama.example.com/ollama",
}


@pytest.mark.parametrize(("given", "url"), FORMS.items(), ids=[form or "unset" for form in FORMS])
def test_ollama_host_is_read_by_ollamas_rule(monkeypatch, given, url):
    monkeypatch.setenv("OLLAMA_HOST", given)
    assert resolve_base_url(None) == url
    assert OllamaEmbedder()._client.base_url == url
    assert OllamaExtractor()._client.base_url == url


@pytest.mark.parametrize(("given", "url"), [(form, url) for form, url in FORMS.items() if form],
                         ids=[form for form in FORMS if form])
def test_the_base_url_option_is_read_by_the_same_rule_and_wins(monkeypatch, given, url):
    monkeypatch.setenv("OLLAMA_HOST", "elsewhere:1")
    assert resolve_base_url(given) == url
    assert OllamaEmbedder(base_url=given)._client.base_url == url
